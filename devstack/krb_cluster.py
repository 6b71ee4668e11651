"""A Kerberized cluster (``stack up --region-servers N --gateways M --kerberos``): the cluster itself, not
a second HBase beside it (as the standalone shape's ``hbase-krb`` is), with Kerberos authentication between
its servers and on its gateways.

**Servers**: ZooKeeper, the master, region servers ``1 .. N`` and gateways ``1 .. M`` log in as
``hbase/localhost@REALM`` from ``hbase.keytab`` and call each other over SASL/GSSAPI. ZooKeeper takes SASL
logins (:func:`zookeeper_sasl_options`: the "Server" section of ``<state>/kerberos/cluster-jaas.conf``, from
``infra/conf/kerberos/cluster-jaas.conf.in``, and the short name of the principal as the client's id); every
HBase JVM logs in to it with the "Client" section (:func:`zookeeper_client_options`), so HBase creates its
znodes with ACLs: every right to ``sasl:hbase``, reading to anyone on the few a client needs (the master's
and meta's locations, the cluster id). Clients without SASL (the native client's meta lookup) still read
those. Authorization is the standalone Kerberized HBase's (:mod:`.krb_authz`): the AccessController, the
service user as superuser, and the client principal's grant made once the cluster is ready.

The KDC starts right after Kafka, before ZooKeeper: each server logs in as it starts.
``<state>/conf/hbase/hbase-site.xml`` gets the properties of ``infra/conf/kerberos/cluster-security.xml.in``
(placeholder ``SECURITY``; it names the HTTPS keystore's password, so it is its owner's only) and
``core-site.xml`` beside it (Hadoop's login code reads ``hadoop.security.authentication`` there only). The
data stay on the local filesystem, unless ``hdfs`` is on.

**HDFS** (``hdfs`` on, :func:`hdfs_security`): the NameNode and the DataNodes are Kerberized too, and log in
as the same ``hbase/localhost@REALM`` (the realm holds it already; its short name ``hbase`` runs the NameNode,
so HBase is HDFS's superuser and owns ``/hbase`` with no permission set-up, as HBase's own test clusters
do). The HDFS ``core-site.xml`` (which every HBase JVM reads too, in place of the one above) and
``hdfs-site.xml`` get ``infra/conf/kerberos/hdfs-core-security.xml.in`` and ``hdfs-security.xml.in``: block
access tokens, the principals and keytabs, SASL on the DataNodes' data transfer (``authentication``) and
HTTPS only on the web servers, which a secure DataNode on unprivileged ports requires. Their TLS is the HTTPS
gateways' keystore (``ssl-server.xml``; ``ssl-client.xml`` trusts it), and WebHDFS takes SPNEGO for
``HTTP/localhost``: the readiness probe logs in with the service keytab (:class:`.webhdfs.WebHdfs`).

**Gateways**: gateway ``j`` (from 0) serves six Thrift servers (``infra/HBaseStack.java kerberos-gateway``):

========================  ==========================================  ==================================
gateway                   port                                        a client
========================  ==========================================  ==================================
plain Thrift1 / Thrift2   ``thrift_port`` / ``thrift2_port`` + 10 j   connects unauthenticated (the
                                                                      gateway calls HBase as ``hbase``):
                                                                      the stack's readiness, the tools
                                                                      that know no Kerberos
SASL Thrift1 / Thrift2    ``kerberos_thrift_port`` + 2 / + 3 + 10 j   SASL/GSSAPI, QOP ``auth-conf``,
                                                                      ``auth-int``, ``auth`` by turns
                                                                      (:func:`.kerberos.cluster_qop`)
HTTPS Thrift1 / Thrift2   ``kerberos_thrift_port`` + 4 / + 5 + 10 j   TLS and SPNEGO
========================  ==========================================  ==================================

A cluster started without Kerberos is not turned into a Kerberized one while it runs: ``up --kerberos``
then refuses, naming ``stack down`` (:func:`kerberized_rendered` tells which one the running servers read).
"""

from __future__ import annotations

from pathlib import Path

from .kerberos import SERVICE_USER, KerberosPart, KerberosSettings, render_template
from .krb_hbase import ensure_https_keystore, krb_hbase_values
from .layout import StackLayout, write_private
from .secure import SecureListener

__all__ = ["HDFS_TLS_CONFIGS", "JAAS_NAME", "SECURITY_MARK", "cluster_jaas", "cluster_security", "hdfs_security",
           "kerberized_rendered",
           "zookeeper_client_options", "zookeeper_sasl_options"]

#: what only a Kerberized cluster's hbase-site.xml holds
SECURITY_MARK = "<name>hbase.security.authentication</name><value>kerberos</value>"
#: the TLS files of a Kerberized HDFS's web servers and clients, beside its core-site.xml and hdfs-site.xml
HDFS_TLS_CONFIGS = ("ssl-server.xml", "ssl-client.xml")
#: the JAAS file of a Kerberized cluster's JVMs, in the realm's folder
JAAS_NAME = "cluster-jaas.conf"


def cluster_security(ks: KerberosSettings, part: KerberosPart, layout: StackLayout,
                     listener: SecureListener) -> tuple[str, str]:
    """Make the HTTPS keystore (once) and the JAAS file (:func:`cluster_jaas`, every time), and return the
    ``SECURITY`` text of ``hbase-site.xml.in`` and the text of the ``core-site.xml`` to write beside it (after
    the HDFS configs, which would remove it). ``listener``: the stack's TLS listener, whose CA signs the
    gateways' certificate."""
    values = krb_hbase_values(ks, part, layout, ensure_https_keystore(layout, listener))
    write_private(cluster_jaas(part), render_template(layout.infra, "cluster-jaas.conf", values))
    return (render_template(layout.infra, "cluster-security.xml", values),
            render_template(layout.infra, "core-site.xml", values))


def hdfs_security(ks: KerberosSettings, part: KerberosPart, layout: StackLayout, listener: SecureListener,
                  namenode_http_port: int) -> tuple[dict[str, str], dict[str, str]]:
    """A Kerberized HDFS's configuration: the placeholders CORE_SECURITY and HDFS_SECURITY of
    ``infra/conf/hadoop/*-site.xml.in``, and file name -> text of ``ssl-server.xml`` and ``ssl-client.xml``
    (they name the keystore's password: to be written readable by their owner only). Makes the HTTPS
    keystore (once)."""
    values = krb_hbase_values(ks, part, layout, ensure_https_keystore(layout, listener))
    values["NAMENODE_HTTP_PORT"] = str(namenode_http_port)
    placeholders = {"CORE_SECURITY": render_template(layout.infra, "hdfs-core-security.xml", values),
                    "HDFS_SECURITY": render_template(layout.infra, "hdfs-security.xml", values)}
    return placeholders, {name: render_template(layout.infra, name, values) for name in HDFS_TLS_CONFIGS}


def cluster_jaas(part: KerberosPart) -> Path:
    """Where a Kerberized cluster's JAAS file is (the realm's folder, its owner's only)."""
    return part.folder / JAAS_NAME


def zookeeper_sasl_options(part: KerberosPart) -> list[str]:
    """The JVM options of a Kerberized cluster's ZooKeeper: the realm, the JAAS file, the SASL provider, and
    the client's id as its principal's short name (``hbase``: the id HBase's znode ACLs name)."""
    return [f"-Djava.security.krb5.conf={part.krb5_conf}", f"-Djava.security.auth.login.config={cluster_jaas(part)}",
            "-Dzookeeper.authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
            "-Dzookeeper.kerberos.removeHostFromPrincipal=true",
            "-Dzookeeper.kerberos.removeRealmFromPrincipal=true"]


def zookeeper_client_options(part: KerberosPart) -> list[str]:
    """The JVM options of a Kerberized cluster's HBase JVMs for ZooKeeper: the JAAS file, and the server's
    principal as ``hbase/<host>`` (ZooKeeper's client would ask for ``zookeeper/<host>``)."""
    return [f"-Djava.security.auth.login.config={cluster_jaas(part)}",
            f"-Dzookeeper.sasl.client.username={SERVICE_USER}"]


def kerberized_rendered(conf: Path) -> bool:
    """Whether the ``hbase-site.xml`` in ``conf`` (what running servers were started with) is a Kerberized
    cluster's."""
    try:
        return SECURITY_MARK in (conf / "hbase-site.xml").read_text()
    except OSError:
        return False
