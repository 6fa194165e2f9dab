package conformance;

/**
 * Runs one JVM SDK, unchanged from Maven Central, against the gateway.
 * Usage: Main segment-java|rudder-java|segment-kotlin. Reads GATEWAY_URL,
 * WRITE_KEY, USER_ID and EVENTS (track|invalid); prints one JSON line with
 * what the SDK reported and exits non-zero when it reported a failure.
 */
public final class Main {
  public static void main(String[] args) throws Exception {
    String url = System.getenv("GATEWAY_URL");
    String key = System.getenv("WRITE_KEY");
    String user = System.getenv("USER_ID");
    boolean invalid = "invalid".equals(System.getenv("EVENTS"));
    switch (args[0]) {
      case "segment-java" -> SegmentJava.run(url, key, user, invalid);
      case "rudder-java" -> RudderJava.run(url, key, user, invalid);
      case "segment-kotlin" -> SegmentKotlin.run(url, key, user);
      default -> throw new IllegalArgumentException("unknown SDK " + args[0]);
    }
  }
}
