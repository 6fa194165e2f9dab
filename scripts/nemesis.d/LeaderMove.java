// A leader move for the nemesis (scripts/nemesis): rotates the replica
// order of every partition of a topic (a reassignment onto the same
// brokers, so no data moves) and then runs a preferred-leader election, so
// each partition's leader changes while producers write to it.
//
//   java -cp "$KAFKA_LIBS/*" LeaderMove.java BOOTSTRAP TOPIC
//
// Exit 0 when at least one leader moved; 1 with a message otherwise.
import java.util.*;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;

public class LeaderMove {
    static Map<Integer, Integer> leaders(Admin admin, String topic) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(10, TimeUnit.SECONDS).get(topic);
        Map<Integer, Integer> out = new TreeMap<>();
        for (TopicPartitionInfo p : d.partitions()) out.put(p.partition(), p.leader() == null ? -1 : p.leader().id());
        return out;
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        String topic = args[1];
        try (Admin admin = Admin.create(props)) {
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(10, TimeUnit.SECONDS).get(topic);
            Map<Integer, Integer> before = leaders(admin, topic);
            Map<TopicPartition, Optional<NewPartitionReassignment>> moves = new HashMap<>();
            Set<TopicPartition> all = new HashSet<>();
            for (TopicPartitionInfo p : d.partitions()) {
                List<Integer> replicas = new ArrayList<>();
                for (Node n : p.replicas()) replicas.add(n.id());
                // The current leader goes last: the new preferred leader is another broker.
                int leader = p.leader() == null ? replicas.get(0) : p.leader().id();
                replicas.remove(Integer.valueOf(leader));
                replicas.add(leader);
                TopicPartition tp = new TopicPartition(topic, p.partition());
                moves.put(tp, Optional.of(new NewPartitionReassignment(replicas)));
                all.add(tp);
            }
            admin.alterPartitionReassignments(moves).all().get(30, TimeUnit.SECONDS);
            long deadline = System.currentTimeMillis() + 30_000;
            while (!admin.listPartitionReassignments(all).reassignments().get(10, TimeUnit.SECONDS).isEmpty()) {
                if (System.currentTimeMillis() > deadline) { System.err.println("reassignment did not finish in 30 s"); System.exit(1); }
                Thread.sleep(200);
            }
            try {
                admin.electLeaders(ElectionType.PREFERRED, all).all().get(30, TimeUnit.SECONDS);
            } catch (Exception e) {
                // Partitions whose preferred leader is not in the ISR (a broker down) keep theirs.
                System.err.println("preferred election: " + e.getMessage());
            }
            Map<Integer, Integer> after = leaders(admin, topic);
            System.out.println(topic + " leaders " + before + " -> " + after);
            System.exit(before.equals(after) ? 1 : 0);
        }
    }
}
