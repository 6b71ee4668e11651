// Users and ACLs of the local stack's SASL_SSL listener, through Kafka's own Admin client (the cached
// kafka-clients jar): `java -cp <kafka lib>/* SecureSetup.java <plaintext bootstrap> <secure folder>
// <worker user> <other user> <topic prefix> <group prefix>`.
//
// - SCRAM-SHA-512 credentials of both users, each password read from <secure folder>/<user>.password
//   (never from the command line, never printed);
// - ACLs (prefixed patterns): the worker user may read, write, describe and create topics starting with
//   <topic prefix> (its topics and its dead-letter topic) and read groups starting with <group prefix>.
//   The other user gets none, so StandardAuthorizer refuses it everything.
//
// Both calls are upserts: running this again changes nothing. It connects to the plaintext listener,
// whose principal (User:ANONYMOUS) is a super user of the broker.
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

public class SecureSetup {
    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: SecureSetup <bootstrap> <secure folder> <worker user> <other user> "
                               + "<topic prefix> <group prefix>");
            System.exit(2);
        }
        String bootstrap = args[0];
        Path folder = Path.of(args[1]);
        String worker = args[2], other = args[3], topicPrefix = args[4], groupPrefix = args[5];
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        try (Admin admin = Admin.create(props)) {
            List<UserScramCredentialAlteration> users = new ArrayList<>();
            for (String user : List.of(worker, other)) {
                String password = Files.readString(folder.resolve(user + ".password"), StandardCharsets.UTF_8).strip();
                users.add(new UserScramCredentialUpsertion(
                    user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password));
            }
            admin.alterUserScramCredentials(users).all().get();
            String principal = "User:" + worker;
            ResourcePattern topics = new ResourcePattern(ResourceType.TOPIC, topicPrefix, PatternType.PREFIXED);
            ResourcePattern groups = new ResourcePattern(ResourceType.GROUP, groupPrefix, PatternType.PREFIXED);
            List<AclBinding> acls = new ArrayList<>();
            for (AclOperation op : List.of(AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE,
                                           AclOperation.CREATE)) {
                acls.add(new AclBinding(topics, new AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW)));
            }
            for (AclOperation op : List.of(AclOperation.READ, AclOperation.DESCRIBE)) {
                acls.add(new AclBinding(groups, new AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW)));
            }
            admin.createAcls(acls).all().get();
        }
        System.out.println("users and ACLs in place");
    }
}
