// Launcher for the local stack's HBase JVMs, run with the JDK's single-file source launcher (no build step).
// hbase-site.xml is read from the classpath (the conf dir comes first).
//
//   HBaseStack.java standalone <thrift1 port> <thrift2 port>
//       standalone HBase (master + region server + ZooKeeper) and both Thrift gateways in ONE JVM;
//   HBaseStack.java gateway <thrift1 port> <thrift2 port> [server option ...]
//       one gateway of a local cluster: the Thrift1 and Thrift2 servers in one JVM. HBase ships them as
//       two main classes, but each is a plain HBase client (it needs only the ZooKeeper quorum), so one
//       JVM can serve both and share one heap and one connection to the cluster. Server options (such as
//       -f framed, -c compact, -hsha) go to both servers; the stack passes none (`bench_gateway` does).
//   HBaseStack.java kerberos <plain1> <plain2> <sasl1> <sasl2> <https1> <https2>
//       the Kerberized standalone HBase (`stack up --kerberos`; hbase-site.xml and core-site.xml set
//       Kerberos) and six gateways, each a ThriftServer with its own Configuration copy: Thrift1 and
//       Thrift2 without QOP (unauthenticated clients; the gateway calls HBase as its own principal), over
//       SASL/GSSAPI with QOP auth-conf, and in HTTP mode with TLS and SPNEGO (QOP auth-conf).
//   HBaseStack.java kerberos-gateway <qop> <plain1> <plain2> <sasl1> <sasl2> <https1> <https2>
//       one gateway of a Kerberized cluster: the same six gateways, without the master, its SASL ones
//       with QOP <qop> (auth, auth-int or auth-conf).
//   HBaseStack.java acl <grant|revoke> <user> <actions> <@namespace|table>
//       a grant to (or revoke from) <user> on the Kerberized HBase (devstack/krb_authz.py): logs in
//       from the master's keytab (the superuser), calls the AccessController, exits 0 once HBase applied it.
//       <actions> is a subset of RWXCA (read, write, exec, create, admin).
//
// A server thread that fails ends the JVM (exit 1), so `stack status` sees the process die instead of a
// JVM that lives on with half of its servers.
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;

public class HBaseStack {
  interface Body { void run() throws Exception; }

  static Thread start(String name, Body body) {
    Thread t = new Thread(() -> {
      try {
        body.run();
      } catch (Throwable e) {
        e.printStackTrace();
        System.exit(1);
      }
    }, name);
    t.start();
    return t;
  }

  static Thread thrift(String thrift1, String thrift2, String[] options) {
    // The Thrift handlers connect to HBase lazily, so they may start before the master is up.
    Configuration c1 = HBaseConfiguration.create();
    Thread t1 = start("thrift1", () -> new org.apache.hadoop.hbase.thrift.ThriftServer(c1)
        .run(serverArgs(thrift1, options)));
    Configuration c2 = HBaseConfiguration.create();
    start("thrift2", () -> new org.apache.hadoop.hbase.thrift2.ThriftServer(c2)
        .run(serverArgs(thrift2, options)));
    return t1;
  }

  static String[] serverArgs(String port, String[] options) {
    // loopback, or (a cluster in network namespaces) the gateway's namespace address
    String bind = System.getProperty("hbase.stack.bind", "127.0.0.1");
    java.util.List<String> argv = new java.util.ArrayList<>(java.util.List.of("-p", port, "-b", bind));
    argv.addAll(java.util.List.of(options));
    return argv.toArray(new String[0]);
  }

  /** One gateway of the Kerberized HBase: its QOP (null: none) and whether it speaks HTTPS. */
  static Thread kerberosGateway(String name, int version, String port, String qop, boolean https) {
    Configuration c = HBaseConfiguration.create();
    if (qop != null) {
      c.set("hbase.thrift.security.qop", qop);
    } else {
      c.unset("hbase.thrift.security.qop");
    }
    c.setBoolean("hbase.regionserver.thrift.http", https);
    c.setBoolean("hbase.thrift.ssl.enabled", https);
    String[] argv = {"-p", port, "-b", "127.0.0.1"};
    if (version == 1) {
      return start(name, () -> new org.apache.hadoop.hbase.thrift.ThriftServer(c).run(argv));
    }
    return start(name, () -> new org.apache.hadoop.hbase.thrift2.ThriftServer(c).run(argv));
  }

  /** The six gateways on ports p[1..6], the SASL ones with QOP qop; returns the first one's thread. */
  static Thread kerberosGateways(String[] p, String qop) {
    Thread first = kerberosGateway("plain-thrift1", 1, p[1], null, false);
    kerberosGateway("plain-thrift2", 2, p[2], null, false);
    kerberosGateway("sasl-thrift1", 1, p[3], qop, false);
    kerberosGateway("sasl-thrift2", 2, p[4], qop, false);
    kerberosGateway("https-thrift1", 1, p[5], "auth-conf", true);
    kerberosGateway("https-thrift2", 2, p[6], "auth-conf", true);
    return first;
  }

  /** Grant or revoke: see the usage above. Exits 0 when done, 1 (stack trace on stderr) on failure. */
  static void acl(String[] args) throws Throwable {
    Configuration conf = HBaseConfiguration.create();
    org.apache.hadoop.security.UserGroupInformation.setConfiguration(conf);
    org.apache.hadoop.security.UserGroupInformation.loginUserFromKeytab(
        conf.get("hbase.master.kerberos.principal"), conf.get("hbase.master.keytab.file"));
    boolean grant = args[1].equals("grant");
    String user = args[2];
    java.util.List<org.apache.hadoop.hbase.security.access.Permission.Action> list = new java.util.ArrayList<>();
    for (char a : args[3].toCharArray()) {
      list.add(org.apache.hadoop.hbase.security.access.Permission.Action.valueOf(switch (a) {
        case 'R' -> "READ"; case 'W' -> "WRITE"; case 'X' -> "EXEC"; case 'C' -> "CREATE"; case 'A' -> "ADMIN";
        default -> throw new IllegalArgumentException("action " + a + " is not one of RWXCA");
      }));
    }
    org.apache.hadoop.hbase.security.access.Permission.Action[] actions =
        list.toArray(new org.apache.hadoop.hbase.security.access.Permission.Action[0]);
    try (org.apache.hadoop.hbase.client.Connection c =
             org.apache.hadoop.hbase.client.ConnectionFactory.createConnection(conf)) {
      if (args[4].startsWith("@")) {
        String ns = args[4].substring(1);
        if (grant) {
          org.apache.hadoop.hbase.security.access.AccessControlClient.grant(c, ns, user, actions);
        } else {
          org.apache.hadoop.hbase.security.access.AccessControlClient.revoke(c, ns, user, actions);
        }
      } else {
        org.apache.hadoop.hbase.TableName table = org.apache.hadoop.hbase.TableName.valueOf(args[4]);
        if (grant) {
          org.apache.hadoop.hbase.security.access.AccessControlClient.grant(c, table, user, null, null, actions);
        } else {
          org.apache.hadoop.hbase.security.access.AccessControlClient.revoke(c, table, user, null, null, actions);
        }
      }
    }
  }

  public static void main(String[] args) throws Exception {
    if (args.length == 5 && args[0].equals("acl") && (args[1].equals("grant") || args[1].equals("revoke"))) {
      try {
        acl(args);
      } catch (Throwable e) {
        e.printStackTrace();
        System.exit(1);
      }
      System.exit(0);  // the HBase client's threads would keep the JVM alive
    }
    if (args.length == 7 && args[0].equals("kerberos")) {
      Thread master = start("hmaster",
          () -> org.apache.hadoop.hbase.master.HMaster.main(new String[] {"start"}));
      kerberosGateways(args, "auth-conf");
      master.join();
      return;
    }
    if (args.length == 8 && args[0].equals("kerberos-gateway")) {
      // three Thrift1 and three Thrift2 servers register the same metrics sources: allowed in this mode
      // (the standalone JVM of `kerberos` is in it already, as HBase's local mode sets it)
      org.apache.hadoop.metrics2.lib.DefaultMetricsSystem.setMiniClusterMode(true);
      String[] ports = java.util.Arrays.copyOfRange(args, 1, 8);  // ports[1..6], as in `kerberos`
      kerberosGateways(ports, args[1]).join();
      return;
    }
    boolean gateway = args.length >= 3 && args[0].equals("gateway");
    if (!gateway && (args.length != 3 || !args[0].equals("standalone"))) {
      System.err.println("usage: HBaseStack.java standalone <thrift1 port> <thrift2 port>\n"
          + "       HBaseStack.java gateway <thrift1 port> <thrift2 port> [server option ...]\n"
          + "       HBaseStack.java kerberos <plain1> <plain2> <sasl1> <sasl2> <https1> <https2>\n"
          + "       HBaseStack.java kerberos-gateway <qop> <plain1> <plain2> <sasl1> <sasl2> <https1> <https2>\n"
          + "       HBaseStack.java acl <grant|revoke> <user> <actions> <@namespace|table>");
      System.exit(2);
    }
    if (gateway) {
      thrift(args[1], args[2], java.util.Arrays.copyOfRange(args, 3, args.length)).join();
      return;
    }
    Thread master = start("hmaster",
        () -> org.apache.hadoop.hbase.master.HMaster.main(new String[] {"start"}));
    thrift(args[1], args[2], new String[0]);
    master.join();
  }
}
