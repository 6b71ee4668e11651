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
 * mutate(), so a count is of distinct rows (of each buffer).
 *
 * Latency: on each such acknowledgement the wrapper also puts, for every Put it acknowledges, the
 * milliseconds from the event's timestamp to now into a histogram of 1 ms buckets (the last one
 * holds 60 s and more). The timestamp is read from the row key, the digits after its second '|'
 * (<hostname>|<log_event>|<timestamp>[|...]), once per Put at mutate(); a key without them counts
 * as written but not in the histogram. Per Put: one parse at mutate(), one subtraction and one
 * array increment at the acknowledgement.
 *
 * Stdout carries nothing but JSON lines for the harness: {"written": N} every 20 ms while N
 * changes, and every second while it changes {"latency_hist": [[ms, puts], ...], "flushes": F}
 * (the histogram's non-empty buckets so far; F the flushes that acknowledged at least one Put).
 * Logs go to stderr.
 *
 * Exit status 1 when a statement fails or the job fails.
 */

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
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

    /** Flushes that acknowledged at least one row. */
    static final AtomicLong FLUSHES = new AtomicLong();

    /** Latencies at or above this many milliseconds go in the histogram's last bucket. */
    static final int CAP_MS = 60_000;

    /** Acknowledged Puts by milliseconds from their event's timestamp (guarded by itself). */
    static final long[] LATENCY = new long[CAP_MS + 1];

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
        long lastHist = -1;
        for (long tick = 1; ; tick++) {
            long n = WRITTEN.get();
            if (n != last) {
                last = n;
                System.out.println("{\"written\": " + n + "}");
                System.out.flush();
            }
            if (tick % 50 == 0 && n != lastHist) {
                lastHist = n;
                System.out.println(histogramLine());
                System.out.flush();
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    /** {"latency_hist": [[ms, puts], ...], "flushes": F}: the non-empty buckets of LATENCY. */
    static String histogramLine() {
        long[] copy;
        synchronized (LATENCY) {
            copy = LATENCY.clone();
        }
        StringBuilder out = new StringBuilder("{\"latency_hist\": [");
        String sep = "";
        for (int ms = 0; ms < copy.length; ms++) {
            if (copy[ms] != 0) {
                out.append(sep).append('[').append(ms).append(", ").append(copy[ms]).append(']');
                sep = ", ";
            }
        }
        return out.append("], \"flushes\": ").append(FLUSHES.get()).append('}').toString();
    }

    /**
     * The event timestamp (ms) in a row key {@code <hostname>|<log_event>|<timestamp>[|...]}: the
     * digits after the second '|'; -1 when there are none.
     */
    static long keyTimestamp(byte[] row) {
        int bars = 0;
        int i = 0;
        while (i < row.length && bars < 2) {
            if (row[i++] == '|') {
                bars++;
            }
        }
        long ts = 0;
        int digits = 0;
        for (; i < row.length && row[i] >= '0' && row[i] <= '9' && digits < 18; i++, digits++) {
            ts = ts * 10 + (row[i] - '0');
        }
        return digits == 0 ? -1 : ts;
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

    /**
     * Counts rows into {@link #WRITTEN}, and their latencies into {@link #LATENCY}, once a flush (or
     * close) after their mutate() returns.
     */
    public static final class CountingMutator implements BufferedMutator {
        private final BufferedMutator real;
        /** Event timestamps of the rows mutated and not yet acknowledged, in mutate() order. */
        private long[] stamps = new long[4096];
        private int pending;

        CountingMutator(BufferedMutator real) { this.real = real; }

        private synchronized void add(List<? extends Mutation> ms) {
            if (pending + ms.size() > stamps.length) {
                stamps = Arrays.copyOf(stamps, Math.max(2 * stamps.length, pending + ms.size()));
            }
            for (Mutation m : ms) {
                stamps[pending++] = keyTimestamp(m.getRow());
            }
        }

        private synchronized int pendingRows() { return pending; }

        /** The first {@code rows} pending rows are acknowledged (HBase answered a flush after them). */
        private synchronized void acknowledge(int rows) {
            if (rows == 0) {
                return;
            }
            long now = System.currentTimeMillis();
            synchronized (LATENCY) {
                for (int i = 0; i < rows; i++) {
                    long ts = stamps[i];
                    if (ts >= 0) {
                        LATENCY[(int) Math.min(Math.max(now - ts, 0), CAP_MS)]++;
                    }
                }
            }
            System.arraycopy(stamps, rows, stamps, 0, pending - rows);
            pending -= rows;
            WRITTEN.addAndGet(rows);
            FLUSHES.incrementAndGet();
        }

        @Override public TableName getName() { return real.getName(); }
        @Override public org.apache.hadoop.conf.Configuration getConfiguration() { return real.getConfiguration(); }
        @Override public void mutate(Mutation m) throws IOException {
            real.mutate(m);
            add(List.of(m));
        }
        @Override public void mutate(List<? extends Mutation> ms) throws IOException {
            real.mutate(ms);
            add(ms);
        }
        // rows mutated while a flush runs (another thread) are left for the next one: a lower bound
        @Override public void flush() throws IOException {
            int rows = pendingRows();
            real.flush();
            acknowledge(rows);
        }
        @Override public void close() throws IOException {
            int rows = pendingRows();
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
