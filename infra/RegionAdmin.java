/*
 * Region changes through HBase's Java Admin API, for the fault tests (tests/integration/test_faults.py):
 * Thrift2 can neither split nor move a region.
 *
 * Run on the stack's cached jars with the HBase JVM's --add-opens (JDK 17 single-file launch):
 *   java -cp '<hbase lib>/*' RegionAdmin.java QUORUM ZK_PORT OP...
 *
 * Operations, done in order:
 *   split:TABLE:KEY   split the region of TABLE holding KEY (KEY in UTF-8) at KEY, and wait until the
 *                     daughters are online (the table has one region more, each with a server)
 *   move:TABLE        move every region of TABLE to another live region server (round robin over the
 *                     servers it is not on), and wait until each is online on its new server
 *   regions:TABLE     report only
 * After each operation one JSON line: {"op": ..., "table": ..., "regions": N, "seconds": S,
 * "servers": {"host,port,startcode": regions on it}}. Exit status 1 on any failure (its message on
 * stderr), 2 on bad arguments. Every wait gives up after 120 s.
 */

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.HRegionLocation;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.RegionLocator;

public class RegionAdmin {
    private static final long WAIT_MS = 120_000;

    private static List<HRegionLocation> locations(Connection conn, TableName table) throws Exception {
        try (RegionLocator locator = conn.getRegionLocator(table)) {
            locator.clearRegionLocationCache();
            return locator.getAllRegionLocations();
        }
    }

    private static String report(String op, TableName table, List<HRegionLocation> locs, double seconds) {
        Map<String, Integer> servers = new TreeMap<>();
        for (HRegionLocation loc : locs) {
            String name = loc.getServerName() == null ? "none" : loc.getServerName().toString();
            servers.merge(name, 1, Integer::sum);
        }
        StringBuilder sb = new StringBuilder();
        sb.append("{\"op\": \"").append(op).append("\", \"table\": \"").append(table.getNameAsString())
          .append("\", \"regions\": ").append(locs.size()).append(", \"seconds\": ")
          .append(String.format("%.3f", seconds)).append(", \"servers\": {");
        boolean first = true;
        for (Map.Entry<String, Integer> e : servers.entrySet()) {
            if (!first) sb.append(", ");
            first = false;
            sb.append('"').append(e.getKey()).append("\": ").append(e.getValue());
        }
        return sb.append("}}").toString();
    }

    private static boolean allOnline(Admin admin, List<HRegionLocation> locs) throws Exception {
        for (HRegionLocation loc : locs) {
            if (loc.getServerName() == null) return false;
        }
        return admin.getRegions(locs.get(0).getRegion().getTable()).size() == locs.size();
    }

    private static List<HRegionLocation> split(Connection conn, Admin admin, TableName table, byte[] key)
            throws Exception {
        int before = admin.getRegions(table).size();
        admin.split(table, key);
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (System.currentTimeMillis() < deadline) {
            List<HRegionLocation> locs = locations(conn, table);
            if (locs.size() > before && allOnline(admin, locs)) return locs;
            Thread.sleep(200);
        }
        throw new IllegalStateException("split of " + table + " at " + new String(key, StandardCharsets.UTF_8)
                                        + " not done within " + WAIT_MS + " ms");
    }

    private static List<HRegionLocation> move(Connection conn, Admin admin, TableName table) throws Exception {
        List<ServerName> live = new ArrayList<>(admin.getRegionServers());
        if (live.size() < 2) throw new IllegalStateException("moving regions needs 2 live region servers, " +
                                                             "there are " + live.size());
        List<HRegionLocation> locs = locations(conn, table);
        Map<String, ServerName> target = new TreeMap<>();
        int next = 0;
        for (HRegionLocation loc : locs) {
            ServerName to = live.get(next++ % live.size());
            if (to.equals(loc.getServerName())) to = live.get(next++ % live.size());
            target.put(loc.getRegion().getEncodedName(), to);
            admin.move(loc.getRegion().getEncodedNameAsBytes(), to);
        }
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (System.currentTimeMillis() < deadline) {
            List<HRegionLocation> now = locations(conn, table);
            boolean done = allOnline(admin, now);
            for (HRegionLocation loc : now) {
                ServerName want = target.get(loc.getRegion().getEncodedName());
                done &= want != null && want.equals(loc.getServerName());
            }
            if (done) return now;
            Thread.sleep(200);
        }
        throw new IllegalStateException("move of " + table + "'s regions not done within " + WAIT_MS + " ms");
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: RegionAdmin QUORUM ZK_PORT OP... (split:TABLE:KEY, move:TABLE, regions:TABLE)");
            System.exit(2);
        }
        Configuration conf = HBaseConfiguration.create();
        conf.set("hbase.zookeeper.quorum", args[0]);
        conf.set("hbase.zookeeper.property.clientPort", args[1]);
        try (Connection conn = ConnectionFactory.createConnection(conf); Admin admin = conn.getAdmin()) {
            for (int i = 2; i < args.length; i++) {
                String[] parts = args[i].split(":", 3);
                long t0 = System.nanoTime();
                TableName table = TableName.valueOf(parts.length > 1 ? parts[1] : "");
                List<HRegionLocation> locs;
                if (parts[0].equals("split") && parts.length == 3) {
                    locs = split(conn, admin, table, parts[2].getBytes(StandardCharsets.UTF_8));
                } else if (parts[0].equals("move") && parts.length == 2) {
                    locs = move(conn, admin, table);
                } else if (parts[0].equals("regions") && parts.length == 2) {
                    locs = locations(conn, table);
                } else {
                    System.err.println("unknown operation " + args[i] + ": split:TABLE:KEY, move:TABLE or regions:TABLE");
                    System.exit(2);
                    return;
                }
                System.out.println(report(parts[0], table, locs, (System.nanoTime() - t0) / 1e9));
                System.out.flush();
            }
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(1);
        }
    }
}
