/*
 * HBase's native write path as a baseline for the peer benchmark (bench/bench_peer.py): reads
 * prebuilt rows from a file, then writes them through one BufferedMutator (the Java client, no
 * gateway) into an existing table, and prints one JSON line with rows/s.
 *
 * Run on the stack's cached jars with the HBase JVM's --add-opens (JDK 17 single-file launch):
 *   java -cp '<hbase lib>/*' BufferedMutatorLoader.java QUORUM ZK_PORT TABLE ROWS_FILE [BUFFER_MB]
 *
 * Rows file (big-endian, as bench/peer_loader.py writes it):
 *   int32 rows; then per row: uint16 key length, key, int64 cell timestamp (ms), uint8 cells;
 *   per cell: uint16 family length, family, uint16 qualifier length, qualifier, int32 value
 *   length, value.
 * Output: the line "ready" once the rows are read and the table's regions located, then
 * {"rows": N, "seconds": S, "rows_per_s": R} where S runs from the first mutate to the end of the
 * final flush (every put acknowledged by HBase). Exit status 1 on any failure.
 */

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.FileInputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.BufferedMutator;
import org.apache.hadoop.hbase.client.BufferedMutatorParams;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Put;

public class BufferedMutatorLoader {
    private static byte[] read(DataInputStream in, int n) throws IOException {
        byte[] b = new byte[n];
        in.readFully(b);
        return b;
    }

    static List<Put> readRows(String path) throws IOException {
        try (DataInputStream in = new DataInputStream(new BufferedInputStream(new FileInputStream(path), 1 << 20))) {
            int rows = in.readInt();
            List<Put> puts = new ArrayList<>(rows);
            for (int i = 0; i < rows; i++) {
                byte[] key = read(in, in.readUnsignedShort());
                long ts = in.readLong();
                int cells = in.readUnsignedByte();
                Put put = new Put(key);
                for (int c = 0; c < cells; c++) {
                    byte[] family = read(in, in.readUnsignedShort());
                    byte[] qualifier = read(in, in.readUnsignedShort());
                    byte[] value = read(in, in.readInt());
                    put.addColumn(family, qualifier, ts, value);
                }
                puts.add(put);
            }
            if (in.read() != -1) {
                throw new IOException(path + ": bytes left after " + rows + " rows (not a rows file of this format)");
            }
            return puts;
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: BufferedMutatorLoader QUORUM ZK_PORT TABLE ROWS_FILE [BUFFER_MB]");
            System.exit(2);
        }
        List<Put> puts = readRows(args[3]);
        long bufferBytes = (args.length > 4 ? Long.parseLong(args[4]) : 8L) << 20;
        Configuration conf = HBaseConfiguration.create();
        conf.set("hbase.zookeeper.quorum", args[0]);
        conf.set("hbase.zookeeper.property.clientPort", args[1]);
        BufferedMutatorParams params = new BufferedMutatorParams(TableName.valueOf(args[2])).writeBufferSize(bufferBytes);
        try (Connection conn = ConnectionFactory.createConnection(conf);
             BufferedMutator mutator = conn.getBufferedMutator(params)) {
            conn.getRegionLocator(TableName.valueOf(args[2])).getAllRegionLocations();  // locate before timing
            System.out.println("ready");
            System.out.flush();
            long t0 = System.nanoTime();
            for (Put put : puts) {
                mutator.mutate(put);
            }
            mutator.flush();
            double seconds = (System.nanoTime() - t0) / 1e9;
            System.out.printf("{\"rows\": %d, \"seconds\": %.3f, \"rows_per_s\": %.1f}%n",
                              puts.size(), seconds, puts.size() / seconds);
            System.out.flush();
        }
    }
}
