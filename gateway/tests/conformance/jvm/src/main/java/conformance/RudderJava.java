package conformance;

import com.rudderstack.sdk.java.analytics.RudderAnalytics;
import com.rudderstack.sdk.java.analytics.Callback;
import com.rudderstack.sdk.java.analytics.messages.IdentifyMessage;
import com.rudderstack.sdk.java.analytics.messages.Message;
import com.rudderstack.sdk.java.analytics.messages.PageMessage;
import com.rudderstack.sdk.java.analytics.messages.TrackMessage;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/** RudderStack's rudder-sdk-java, unchanged from Maven Central, against the gateway. */
final class RudderJava {
  static void run(String url, String writeKey, String user, boolean invalid) throws Exception {
    Report report = new Report("rudder-java", Report.mavenVersion("com.rudderstack.sdk.java.analytics", "analytics"), invalid ? 4 : 3);
    RudderAnalytics analytics = RudderAnalytics.builder(writeKey)
        .setDataPlaneUrl(url)
        .flushQueueSize(20)
        .flushInterval(1, TimeUnit.SECONDS)
        .retries(3)
        .callback(new Callback() {
          @Override public void success(Message m) { report.success(m.type().name()); }
          @Override public void failure(Message m, Throwable t) { report.failure(m.type().name(), t); }
        })
        .build();
    analytics.enqueue(TrackMessage.builder("Link Clicked").userId(user)
        .properties(Map.of("href", "https://example.com/pricing", "text", "Pricing")));
    analytics.enqueue(PageMessage.builder("Pricing").userId(user)
        .properties(Map.of("url", "https://example.com/pricing", "path", "/pricing")));
    analytics.enqueue(IdentifyMessage.builder().userId(user).traits(Map.of("plan", "pro")));
    if (invalid) {
      analytics.enqueue(TrackMessage.builder("Link Clicked").userId(user).properties(Map.of("text", "no href")));
    }
    analytics.flush();
    report.finish();
  }
}
