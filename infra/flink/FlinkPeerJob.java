/*
 * Apache Flink as the benchmark peer (bench/bench_peer.py): a local MiniCluster in this JVM runs
 * the Flink SQL statements of a file (a Kafka source table, an HBase sink table, one INSERT INTO
 * ... SELECT) under the Flink configuration of a properties file, until the process is stopped (the
 * Kafka source is unbounded, as Flume's is).
 *
 * Compiled once into the jar cache against the resolved Flink jars (bench/peer_provision.py), then:
 *   java -cp '<flink lib>/*:<classes>' FlinkPeerJob FLINK_CONF_PROPERTIES JOB_SQL
 *
 * Progress: Flink counts no rows written by its HBase sink, so the sink table sets
 * 'properties.hbase.client.connection.impl' = 'FlinkPeerJob$CountingConnection': HBase's
 * ConnectionFactory then builds this wrapper, which opens the usual connection and hands the sink
 * a BufferedMutator that counts the rows passed to mutate() and adds them to the written count
 * only when a later flush() or close() returns (HBase acknowledged every row sent before it; a
 * failed flush throws and counts nothing). The sink deduplicates its buffer by row key before
 * mutate(), so a count is of distinct rows. Stdout carries nothing but the lines
 * {"written": N} (every 20 ms while N changes) for the harness; logs go to stderr.
 *
 * Exit status 1 when a statement fails or the job fails.
 */

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.BufferedMutator;
import org.apache.hadoop.hbase.client.BufferedMutatorParams;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Mutation;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.client.TableBuilder;
import org.apache.hadoop.hbase.security.User;

public class FlinkPeerJob {
    /** Rows HBase has acknowledged, over every sink task of this JVM. */
    static final AtomicLong WRITTEN = new AtomicLong();

    /** HBase's own connection class, which the wrapper opens underneath. */
    static final String REAL_CONNECTION = "org.apache.hadoop.hbase.client.ConnectionImplementation";

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: FlinkPeerJob FLINK_CONF_PROPERTIES JOB_SQL");
            System.exit(2);
        }
        Properties props = new Properties();
        try (InputStream in = Files.newInputStream(Path.of(args[0]))) {
            props.load(in);
        }
        Map<String, String> settings = new HashMap<>();
        props.stringPropertyNames().forEach(k -> settings.put(k, props.getProperty(k)));
        String sql = Files.readString(Path.of(args[1]));

        Thread reporter = new Thread(FlinkPeerJob::report, "written-reporter");
        reporter.setDaemon(true);
        reporter.start();
        try {
            StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(
                Configuration.fromMap(settings));
            StreamTableEnvironment tables = StreamTableEnvironment.create(env);
            TableResult last = null;
            // statements end with ';' at the end of a line (bench/peer_flink.py writes them so)
            for (String statement : sql.split(";\\s*(\\r?\\n|$)")) {
                if (!statement.isBlank()) {
                    last = tables.executeSql(statement);
                }
            }
            if (last == null) {
                throw new IllegalArgumentException(args[1] + " holds no statement");
            }
            last.await();  // the INSERT's job: runs until the process is stopped
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(1);
        }
    }

    private static void report() {
        long last = -1;
        while (true) {
            long n = WRITTEN.get();
            if (n != last) {
                last = n;
                System.out.println("{\"written\": " + n + "}");
                System.out.flush();
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    /** A Connection that delegates to HBase's own and counts what its BufferedMutators write. */
    public static final class CountingConnection implements Connection {
        private final Connection real;

        /** The constructor HBase's ConnectionFactory calls for hbase.client.connection.impl. */
        public CountingConnection(org.apache.hadoop.conf.Configuration conf, ExecutorService pool, User user)
                throws IOException {
            org.apache.hadoop.conf.Configuration inner = new org.apache.hadoop.conf.Configuration(conf);
            inner.set("hbase.client.connection.impl", REAL_CONNECTION);
            this.real = ConnectionFactory.createConnection(inner, pool, user);
        }

        @Override public org.apache.hadoop.conf.Configuration getConfiguration() { return real.getConfiguration(); }
        @Override public BufferedMutator getBufferedMutator(TableName name) throws IOException {
            return new CountingMutator(real.getBufferedMutator(name));
        }
        @Override public BufferedMutator getBufferedMutator(BufferedMutatorParams params) throws IOException {
            return new CountingMutator(real.getBufferedMutator(params));
        }
        @Override public RegionLocator getRegionLocator(TableName name) throws IOException {
            return real.getRegionLocator(name);
        }
        @Override public void clearRegionLocationCache() { real.clearRegionLocationCache(); }
        @Override public Admin getAdmin() throws IOException { return real.getAdmin(); }
        @Override public void close() throws IOException { real.close(); }
        @Override public boolean isClosed() { return real.isClosed(); }
        @Override public TableBuilder getTableBuilder(TableName name, ExecutorService pool) {
            return real.getTableBuilder(name, pool);
        }
        @Override public void abort(String why, Throwable e) { real.abort(why, e); }
        @Override public boolean isAborted() { return real.isAborted(); }
    }

    /** Counts rows into {@link #WRITTEN} once a flush (or close) after their mutate() returns. */
    public static final class CountingMutator implements BufferedMutator {
        private final BufferedMutator real;
        private final AtomicLong pending = new AtomicLong();

        CountingMutator(BufferedMutator real) { this.real = real; }

        private void acknowledge(long rows) {
            pending.addAndGet(-rows);
            WRITTEN.addAndGet(rows);
        }

        @Override public TableName getName() { return real.getName(); }
        @Override public org.apache.hadoop.conf.Configuration getConfiguration() { return real.getConfiguration(); }
        @Override public void mutate(Mutation m) throws IOException {
            real.mutate(m);
            pending.incrementAndGet();
        }
        @Override public void mutate(List<? extends Mutation> ms) throws IOException {
            real.mutate(ms);
            pending.addAndGet(ms.size());
        }
        // rows mutated while a flush runs (another thread) are left for the next one: a lower bound
        @Override public void flush() throws IOException {
            long rows = pending.get();
            real.flush();
            acknowledge(rows);
        }
        @Override public void close() throws IOException {
            long rows = pending.get();
            real.close();
            acknowledge(rows);
        }
        @Override public void setWriteBufferPeriodicFlush(long timeoutMs, long timerTickMs) {
            real.setWriteBufferPeriodicFlush(timeoutMs, timerTickMs);
        }
        @Override public void disableWriteBufferPeriodicFlush() { real.disableWriteBufferPeriodicFlush(); }
        @Override public long getWriteBufferPeriodicFlushTimeoutMs() { return real.getWriteBufferPeriodicFlushTimeoutMs(); }
        @Override public long getWriteBufferPeriodicFlushTimerTickMs() { return real.getWriteBufferPeriodicFlushTimerTickMs(); }
        @Override public long getWriteBufferSize() { return real.getWriteBufferSize(); }
        @Override public void setRpcTimeout(int timeout) { real.setRpcTimeout(timeout); }
        @Override public void setOperationTimeout(int timeout) { real.setOperationTimeout(timeout); }
    }
}
