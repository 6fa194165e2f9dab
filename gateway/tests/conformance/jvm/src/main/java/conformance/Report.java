package conformance;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/** What an SDK's callback said about each message, printed as the driver's one JSON line. */
final class Report {
  final String sdk;
  final String version;
  final CountDownLatch pending;
  final ConcurrentLinkedQueue<String> successes = new ConcurrentLinkedQueue<>();
  final ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();

  Report(String sdk, String version, int messages) {
    this.sdk = sdk;
    this.version = version;
    this.pending = new CountDownLatch(messages);
  }

  void success(String what) {
    successes.add(what);
    pending.countDown();
  }

  void failure(String what, Throwable why) {
    failures.add(what + ": " + why);
    pending.countDown();
  }

  /** Waits for every message's verdict, prints the report and exits 0 only when all succeeded. */
  void finish() throws InterruptedException {
    boolean settled = pending.await(30, TimeUnit.SECONDS);
    boolean ok = settled && failures.isEmpty();
    System.out.println(json(Map.of(
        "sdk", sdk, "version", version, "ok", ok, "settled", settled,
        "successes", List.copyOf(successes), "failures", List.copyOf(failures))));
    System.out.flush();
    Runtime.getRuntime().halt(ok ? 0 : 1);
  }

  /** The version Maven recorded in an SDK's jar (its manifest often has none). */
  static String mavenVersion(String group, String artifact) {
    try (var in = Report.class.getResourceAsStream("/META-INF/maven/" + group + "/" + artifact + "/pom.properties")) {
      if (in == null) return "?";
      var props = new java.util.Properties();
      props.load(in);
      return props.getProperty("version", "?");
    } catch (java.io.IOException e) {
      return "?";
    }
  }

  private static String json(Object value) {
    if (value instanceof Map<?, ?> map) {
      StringBuilder b = new StringBuilder("{");
      for (Map.Entry<?, ?> e : map.entrySet()) {
        if (b.length() > 1) b.append(',');
        b.append(json(e.getKey())).append(':').append(json(e.getValue()));
      }
      return b.append('}').toString();
    }
    if (value instanceof List<?> list) {
      StringBuilder b = new StringBuilder("[");
      for (Object o : list) {
        if (b.length() > 1) b.append(',');
        b.append(json(o));
      }
      return b.append(']').toString();
    }
    if (value instanceof Boolean || value instanceof Number) return value.toString();
    return '"' + String.valueOf(value).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + '"';
  }
}
