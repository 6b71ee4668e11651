// Launcher for the local stack: standalone HBase (master + region server + ZooKeeper) and both Thrift
// gateways in ONE JVM, run with the JDK's single-file source launcher (no build step).
// Args: <thrift1 port> <thrift2 port>. hbase-site.xml is read from the classpath (conf dir first).
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

  public static void main(String[] args) throws Exception {
    String thrift1 = args[0];
    String thrift2 = args[1];
    Thread master = start("hmaster",
        () -> org.apache.hadoop.hbase.master.HMaster.main(new String[] {"start"}));
    // The Thrift handlers connect to HBase lazily, so they may start before the master is up.
    Configuration c1 = HBaseConfiguration.create();
    start("thrift1", () -> new org.apache.hadoop.hbase.thrift.ThriftServer(c1)
        .run(new String[] {"-p", thrift1, "-b", "127.0.0.1"}));
    Configuration c2 = HBaseConfiguration.create();
    start("thrift2", () -> new org.apache.hadoop.hbase.thrift2.ThriftServer(c2)
        .run(new String[] {"-p", thrift2, "-b", "127.0.0.1"}));
    master.join();
  }
}
