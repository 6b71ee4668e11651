// Launcher for the local stack's HBase JVMs, run with the JDK's single-file source launcher (no build step).
// hbase-site.xml is read from the classpath (the conf dir comes first).
//
//   HBaseStack.java standalone <thrift1 port> <thrift2 port>
//       standalone HBase (master + region server + ZooKeeper) and both Thrift gateways in ONE JVM;
//   HBaseStack.java gateway <thrift1 port> <thrift2 port>
//       one gateway of a local cluster: the Thrift1 and Thrift2 servers in one JVM. HBase ships them as
//       two main classes, but each is a plain HBase client (it needs only the ZooKeeper quorum), so one
//       JVM can serve both and share one heap and one connection to the cluster.
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

  static Thread thrift(String thrift1, String thrift2) {
    // The Thrift handlers connect to HBase lazily, so they may start before the master is up.
    Configuration c1 = HBaseConfiguration.create();
    Thread t1 = start("thrift1", () -> new org.apache.hadoop.hbase.thrift.ThriftServer(c1)
        .run(new String[] {"-p", thrift1, "-b", "127.0.0.1"}));
    Configuration c2 = HBaseConfiguration.create();
    start("thrift2", () -> new org.apache.hadoop.hbase.thrift2.ThriftServer(c2)
        .run(new String[] {"-p", thrift2, "-b", "127.0.0.1"}));
    return t1;
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 3 || !(args[0].equals("standalone") || args[0].equals("gateway"))) {
      System.err.println("usage: HBaseStack.java standalone|gateway <thrift1 port> <thrift2 port>");
      System.exit(2);
    }
    if (args[0].equals("gateway")) {
      thrift(args[1], args[2]).join();
      return;
    }
    Thread master = start("hmaster",
        () -> org.apache.hadoop.hbase.master.HMaster.main(new String[] {"start"}));
    thrift(args[1], args[2]);
    master.join();
  }
}
