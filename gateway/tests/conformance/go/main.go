// Command conformance-go runs Segment's or RudderStack's Go SDK, unchanged
// from the Go module proxy, against the gateway.
//
// Usage: conformance-go segment|rudder. Reads GATEWAY_URL, WRITE_KEY, USER_ID
// and EVENTS (track|invalid); prints one JSON line with what the SDK's
// callback reported and exits non-zero when it reported a failure.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	rudder "github.com/rudderlabs/analytics-go/v4"
	segment "github.com/segmentio/analytics-go/v3"
)

// outcomes collects what the SDK's Callback says about each message.
type outcomes struct {
	mu        sync.Mutex
	successes int
	failures  []string
}

func (o *outcomes) success() { o.mu.Lock(); o.successes++; o.mu.Unlock() }
func (o *outcomes) failure(err error) {
	o.mu.Lock()
	o.failures = append(o.failures, err.Error())
	o.mu.Unlock()
}

type segmentCallback struct{ *outcomes }

func (c segmentCallback) Success(segment.Message)            { c.success() }
func (c segmentCallback) Failure(_ segment.Message, e error) { c.failure(e) }

type rudderCallback struct{ *outcomes }

func (c rudderCallback) Success(rudder.Message)            { c.success() }
func (c rudderCallback) Failure(_ rudder.Message, e error) { c.failure(e) }

func main() {
	sdk := os.Args[1]
	url, key, user := os.Getenv("GATEWAY_URL"), os.Getenv("WRITE_KEY"), os.Getenv("USER_ID")
	invalid := os.Getenv("EVENTS") == "invalid"
	out := &outcomes{}
	var enqueueErrs []string
	note := func(err error) {
		if err != nil {
			enqueueErrs = append(enqueueErrs, err.Error())
		}
	}
	sent := 3
	var version string
	switch sdk {
	case "segment":
		version = moduleVersion("github.com/segmentio/analytics-go/v3")
		client, err := segment.NewWithConfig(key, segment.Config{Endpoint: url, Interval: 200 * time.Millisecond, BatchSize: 20, Callback: segmentCallback{out}})
		if err != nil {
			panic(err)
		}
		note(client.Enqueue(segment.Track{UserId: user, Event: "Link Clicked", Properties: segment.NewProperties().Set("href", "https://example.com/pricing").Set("text", "Pricing")}))
		note(client.Enqueue(segment.Page{UserId: user, Name: "Pricing", Properties: segment.NewProperties().SetURL("https://example.com/pricing").SetPath("/pricing")}))
		note(client.Enqueue(segment.Identify{UserId: user, Traits: segment.NewTraits().Set("plan", "pro")}))
		if invalid {
			sent++
			note(client.Enqueue(segment.Track{UserId: user, Event: "Link Clicked", Properties: segment.NewProperties().Set("text", "no href")}))
		}
		note(client.Close())
	case "rudder":
		version = moduleVersion("github.com/rudderlabs/analytics-go/v4")
		client, err := rudder.NewWithConfig(key, rudder.Config{DataPlaneUrl: url, Interval: 200 * time.Millisecond, BatchSize: 20, Callback: rudderCallback{out}})
		if err != nil {
			panic(err)
		}
		note(client.Enqueue(rudder.Track{UserId: user, Event: "Link Clicked", Properties: rudder.NewProperties().Set("href", "https://example.com/pricing").Set("text", "Pricing")}))
		note(client.Enqueue(rudder.Page{UserId: user, Name: "Pricing", Properties: rudder.NewProperties().SetURL("https://example.com/pricing").SetPath("/pricing")}))
		note(client.Enqueue(rudder.Identify{UserId: user, Traits: rudder.NewTraits().Set("plan", "pro")}))
		if invalid {
			sent++
			note(client.Enqueue(rudder.Track{UserId: user, Event: "Link Clicked", Properties: rudder.NewProperties().Set("text", "no href")}))
		}
		note(client.Close())
	default:
		fmt.Fprintln(os.Stderr, "unknown SDK", sdk)
		os.Exit(2)
	}
	// Close waits for the last upload; every message must have been reported a success.
	ok := len(out.failures) == 0 && len(enqueueErrs) == 0 && out.successes == sent
	report, _ := json.Marshal(map[string]any{"sdk": sdk + "-go", "version": version, "ok": ok, "successes": out.successes, "failures": out.failures, "errors": enqueueErrs})
	fmt.Println(string(report))
	if !ok {
		os.Exit(1)
	}
}

// moduleVersion is the SDK's module version as built (its Version constant
// is not kept up to date by every vendor).
func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "?"
	}
	for _, m := range info.Deps {
		if strings.EqualFold(m.Path, path) {
			return m.Version
		}
	}
	return "?"
}
