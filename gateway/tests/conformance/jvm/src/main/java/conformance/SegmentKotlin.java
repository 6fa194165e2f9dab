package conformance;

import com.segment.analytics.kotlin.core.Configuration;
import com.segment.analytics.kotlin.core.compat.ConfigurationBuilder;
import com.segment.analytics.kotlin.core.compat.JavaAnalytics;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.stream.Stream;

/**
 * Segment's analytics-kotlin core, unchanged from Maven Central, driven
 * through its Java-facing API (JavaAnalytics). It always uses https:// (for
 * its settings at cdnHost and its uploads at the settings' apiHost), so the
 * suite runs it against the TLS listener with the test CA in the JVM's
 * trust store. Success is what the SDK itself exposes: its errorHandler is
 * never called, and its event storage holds none of this run's events once
 * the flush is done (it deletes a batch file only after an accepted upload).
 */
final class SegmentKotlin {
  static void run(String url, String writeKey, String user) throws Exception {
    String host = url.replaceFirst("^https?://", "") + "/v1";
    ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
    Configuration config = new ConfigurationBuilder(writeKey)
        // The JVM storage needs an application object; any value serves off Android.
        .setApplication("eventgw-conformance")
        .setApiHost(host)
        .setCdnHost(host)
        .setFlushAt(3)
        .setFlushInterval(1)
        .build();
    config.setErrorHandler(t -> {
      errors.add(String.valueOf(t));
      return kotlin.Unit.INSTANCE;
    });
    JavaAnalytics analytics = new JavaAnalytics(config);
    analytics.identify(user, Map.of("plan", "pro"));
    analytics.track("Link Clicked", Map.of("href", "https://example.com/pricing", "text", "Pricing"));
    analytics.screen("Pricing", Map.of("variation", "b"), "Pages");
    analytics.flush();
    boolean drained = false;
    for (int i = 0; i < 60 && !drained; i++) {
      Thread.sleep(500);
      analytics.flush();
      drained = i >= 4 && !pending(user);
    }
    Report report = new Report("segment-kotlin", Report.mavenVersion("com.segment.analytics.kotlin", "core"), 0);
    for (String e : errors) report.failures.add(e);
    if (!drained) report.failures.add("events of this run still in the SDK's storage after 30 s");
    report.finish();
  }

  /** Whether any batch file of the SDK (under /tmp/analytics-kotlin or the working directory) still holds this run's events. */
  private static boolean pending(String user) throws Exception {
    for (Path root : List.of(Path.of("/tmp/analytics-kotlin"), Path.of(".").toAbsolutePath())) {
      if (!Files.isDirectory(root)) continue;
      try (Stream<Path> files = Files.walk(root, 6)) {
        boolean found = files.filter(Files::isRegularFile)
            // Batch files live in an `events` directory; the settings file
            // beside it keeps the user id for good and is not a pending batch.
            .filter(p -> p.getParent() != null && p.getParent().getFileName().toString().equals("events"))
            .anyMatch(p -> {
              try {
                return Files.size(p) < 5_000_000 && Files.readString(p).contains(user);
              } catch (Exception e) {
                return false;
              }
            });
        if (found) return true;
      }
    }
    return false;
  }
}
