// ACLs of principals that log in on the local stack's SSO listener (GSSAPI, OAUTHBEARER), through Kafka's own
// Admin client (the cached kafka-clients jar): `java -cp <kafka lib>/* AclSetup.java <plaintext bootstrap>
// <topic prefix> <group prefix> <principal>...` (principals as `User:name`).
//
// Each principal gets what SecureSetup.java gives the SCRAM worker user: read, write, describe and create
// topics starting with <topic prefix>, read and describe groups starting with <group prefix> (prefixed
// patterns). No credentials are made here: Kerberos and the token issuer own them. An upsert: running this
// again changes nothing. It connects to the plaintext listener, whose principal is a super user.
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

public class AclSetup {
    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: AclSetup <bootstrap> <topic prefix> <group prefix> <principal>...");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        ResourcePattern topics = new ResourcePattern(ResourceType.TOPIC, args[1], PatternType.PREFIXED);
        ResourcePattern groups = new ResourcePattern(ResourceType.GROUP, args[2], PatternType.PREFIXED);
        List<AclBinding> acls = new ArrayList<>();
        for (String principal : Arrays.asList(args).subList(3, args.length)) {
            for (AclOperation op : List.of(AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE,
                                           AclOperation.CREATE)) {
                acls.add(new AclBinding(topics, new AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW)));
            }
            for (AclOperation op : List.of(AclOperation.READ, AclOperation.DESCRIBE)) {
                acls.add(new AclBinding(groups, new AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW)));
            }
        }
        try (Admin admin = Admin.create(props)) {
            admin.createAcls(acls).all().get();
        }
        System.out.println("ACLs in place");
    }
}
