# The ingest worker image (used by docker-compose.yml). The Thrift2 IDL is extracted from the same
# hbase-thrift jar the local stack uses.
FROM maven:3.9-eclipse-temurin-17 AS idl
RUN mvn -B -q org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
        -Dartifact=org.apache.hbase:hbase-thrift:2.6.1 -DoutputDirectory=/tmp/jar \
 && cd /tmp && jar xf /tmp/jar/hbase-thrift-2.6.1.jar org/apache/hadoop/hbase/thrift2/hbase.thrift

FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY pipeline pipeline
COPY connectors connectors
COPY devstack devstack
COPY config config
COPY infra infra
COPY --from=idl /tmp/org/apache/hadoop/hbase/thrift2/hbase.thrift /opt/hbase2.thrift
RUN pip install --no-cache-dir .
ENV HBASE_INGEST_THRIFT2_IDL=/opt/hbase2.thrift
ENTRYPOINT ["hbase-ingest"]
