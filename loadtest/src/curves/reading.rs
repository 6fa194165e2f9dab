//! The paragraph under the cost curves, worked out from their figures so the
//! words cannot drift from the numbers. A change no larger than the runs' own
//! spread is reported as such, with its figures, and not explained: on a
//! shared machine that is noise until more runs separate it.

/// One figure over a point's runs: the median and the spread (min–max).
#[derive(Debug, Clone, Copy)]
pub(super) struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// Whether the runs of two points cover a common value (touching ends
    /// included): then they do not tell the points apart. A NaN end (no CPU
    /// reading) counts as overlapping, so nothing is explained from it.
    fn overlaps(&self, other: &Spread) -> bool {
        !(self.max < other.min || other.max < self.min)
    }
}

/// One point's CPU per event (µs), for the reading.
pub(super) struct Median {
    pub curve: &'static str,
    pub batch: usize,
    pub bytes: usize,
    pub cpu: Spread,
}

/// The move of CPU per event between two points of one curve.
struct Change {
    from: Spread,
    to: Spread,
}

impl Change {
    /// From the first to the last point of `curve`.
    fn along(medians: &[Median], curve: &str) -> Option<Self> {
        let mut points = medians.iter().filter(|m| m.curve == curve);
        let from = points.next()?.cpu;
        let to = points.next_back().map_or(from, |m| m.cpu);
        Some(Self { from, to })
    }

    fn percent(&self) -> String {
        format!("{:+.0}%", (self.to.median - self.from.median) * 100.0 / self.from.median)
    }

    fn within_spread(&self) -> bool {
        self.from.overlaps(&self.to)
    }

    /// The figure and the runs' spread, without a cause.
    fn spread_words(&self) -> String {
        let (a, b) = (self.from, self.to);
        format!(
            "{}, within the runs' spread ({:.2}–{:.2} µs against {:.2}–{:.2} µs)",
            self.percent(),
            a.min,
            a.max,
            b.min,
            b.max
        )
    }

    /// The figure with `cause` when the spreads are apart, else the spread.
    fn read(&self, cause: &str) -> String {
        if self.within_spread() { self.spread_words() } else { format!("{} ({cause})", self.percent()) }
    }
}

/// `read` of the change along `curve`, or "n/a" without the curve.
fn read_curve(medians: &[Median], curve: &str, cause: &str) -> String {
    Change::along(medians, curve).map_or("n/a".to_owned(), |c| c.read(cause))
}

/// The batch-size curve fitted as CPU per request = fixed + per event ×
/// batch (least squares): `(fixed µs, µs per event)`.
fn batch_fit(medians: &[Median]) -> Option<(f64, f64)> {
    let batch: Vec<(f64, f64)> = medians
        .iter()
        .filter(|m| m.curve == "batch size")
        .map(|m| (m.batch as f64, m.cpu.median * m.batch as f64))
        .collect();
    if batch.len() < 3 {
        return None;
    }
    let n = batch.len() as f64;
    let (sx, sy) = batch.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = batch.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    let sxy: f64 = batch.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let per_event = sxy / sxx;
    Some((my - per_event * mx, per_event))
}

/// The event-size sentence, from the curve's first two points.
fn event_size(medians: &[Median]) -> String {
    let size: Vec<&Median> = medians.iter().filter(|m| m.curve == "event size").collect();
    match (size.first(), size.get(1)) {
        (Some(a), Some(b)) if b.bytes > a.bytes => {
            let change = Change { from: a.cpu, to: b.cpu };
            if change.within_spread() {
                format!(
                    "Event size: {} B instead of {} B changes the cost per event by {}",
                    b.bytes,
                    a.bytes,
                    change.spread_words()
                )
            } else {
                let per_kb = (b.cpu.median - a.cpu.median) * 1000.0 / (b.bytes - a.bytes) as f64;
                format!("Event size is linear too: {per_kb:.1} µs per extra KB (JSON decode, copy, compression)")
            }
        }
        _ => "Event size: n/a".to_owned(),
    }
}

/// The paragraph reading the curves: the batch-size fit and its knee, then
/// each other curve as the change from its first point.
pub(super) fn reading(medians: &[Median]) -> Option<String> {
    let (fixed, per_event) = batch_fit(medians)?;
    Some(format!(
        "**Reading** (worked out from the medians and spreads above by `loadtest curves`). CPU per request grows linearly with \
         the batch: a least-squares line through the batch-size curve gives **{fixed:.0} µs fixed per request** \
         (HTTP, authentication, quotas, the answer, one completion) plus **{per_event:.1} µs per event** (decode, \
         validation, enrichment, the record, librdkafka's share). The fixed part equals {knee:.0} events' work, so \
         batches below about {knee:.0} events pay mostly per request and batches above about {knee10:.0} are within \
         10% of the per-event floor: that is the knee. {size}. gzip changes the cost per event by {gzip}; 200 event \
         types in the mix instead of 1 by {types}; 10,000 open connections instead of 10 by {conns}. At this offered \
         rate the gateway also pays for waking its threads per request, so every figure here is above the cost at \
         saturation (the Targets table).",
        knee = fixed / per_event.max(f64::EPSILON),
        knee10 = 10.0 * fixed / per_event.max(f64::EPSILON),
        size = event_size(medians),
        gzip = read_curve(medians, "compression", "inflating is cheap next to the rest"),
        types = read_curve(medians, "event types", "more schemas and routes in the caches"),
        conns = read_curve(medians, "connections", "epoll and per-connection buffers"),
    ))
}

#[cfg(test)]
mod reading_tests {
    use super::{Median, Spread, reading};

    /// A point whose runs spread from `min` to `max` around `median`.
    fn point(curve: &'static str, bytes: usize, (median, min, max): (f64, f64, f64)) -> Median {
        Median { curve, batch: 10, bytes, cpu: Spread { median, min, max } }
    }

    /// The batch-size curve of 100 µs per request plus 2 µs per event,
    /// exactly, with no spread.
    fn batch_curve() -> Vec<Median> {
        [1usize, 10, 50, 200]
            .iter()
            .map(|&b| {
                let cpu = (100.0 + 2.0 * b as f64) / b as f64;
                Median { curve: "batch size", batch: b, bytes: 200, cpu: Spread { median: cpu, min: cpu, max: cpu } }
            })
            .collect()
    }

    #[test]
    fn the_batch_curve_is_read_as_fixed_plus_per_event_cost() {
        let mut medians = batch_curve();
        medians.push(point("event size", 200, (10.0, 10.0, 10.0)));
        medians.push(point("event size", 2200, (14.0, 14.0, 14.0)));
        medians.push(point("connections", 200, (10.0, 10.0, 10.0)));
        medians.push(point("connections", 200, (12.5, 12.5, 12.5)));
        let text = reading(&medians).expect("a reading");
        assert!(text.contains("**100 µs fixed per request**"), "{text}");
        assert!(text.contains("**2.0 µs per event**"), "{text}");
        assert!(text.contains("about 50 events pay mostly per request"), "{text}");
        assert!(text.contains("2.0 µs per extra KB"), "{text}");
        assert!(text.contains("instead of 10 by +25% (epoll and per-connection buffers)"), "{text}");
        // A curve that was not run gets no figure and no cause.
        assert!(text.contains("gzip changes the cost per event by n/a;"), "{text}");
        assert!(!text.contains("inflating"), "{text}");
    }

    /// The same medians (+5% with gzip, +4% from 200 B to 2,200 B events,
    /// +20% with 200 types) with the spreads given.
    fn with_spreads(plain: (f64, f64), gzip: (f64, f64), small: (f64, f64), large: (f64, f64)) -> String {
        let mut medians = batch_curve();
        medians.push(point("event size", 200, (10.0, small.0, small.1)));
        medians.push(point("event size", 2200, (10.4, large.0, large.1)));
        medians.push(point("compression", 200, (10.0, plain.0, plain.1)));
        medians.push(point("compression", 200, (10.5, gzip.0, gzip.1)));
        medians.push(point("event types", 200, (10.0, 9.9, 10.1)));
        medians.push(point("event types", 200, (12.0, 11.9, 12.1)));
        reading(&medians).expect("a reading")
    }

    #[test]
    fn a_change_within_the_runs_spread_is_given_with_its_figures_and_no_cause() {
        let text = with_spreads((9.0, 11.0), (9.5, 11.5), (9.0, 11.0), (9.5, 11.5));
        assert!(
            text.contains(
                "gzip changes the cost per event by +5%, within the runs' spread (9.00–11.00 µs against 9.50–11.50 µs);"
            ),
            "{text}"
        );
        assert!(!text.contains("inflating"), "{text}");
        assert!(
            text.contains(
                "Event size: 2200 B instead of 200 B changes the cost per event by +4%, within the runs' spread \
                 (9.00–11.00 µs against 9.50–11.50 µs)."
            ),
            "{text}"
        );
        assert!(!text.contains("per extra KB") && !text.contains("JSON decode"), "{text}");
        // The separated curve beside them keeps its cause.
        assert!(text.contains("instead of 1 by +20% (more schemas and routes in the caches)"), "{text}");
    }

    #[test]
    fn a_change_beyond_the_runs_spread_keeps_its_cause() {
        let text = with_spreads((9.9, 10.1), (10.4, 10.6), (9.9, 10.1), (10.3, 10.5));
        assert!(
            text.contains("gzip changes the cost per event by +5% (inflating is cheap next to the rest);"),
            "{text}"
        );
        assert!(
            text.contains("Event size is linear too: 0.2 µs per extra KB (JSON decode, copy, compression)."),
            "{text}"
        );
        assert!(!text.contains("within the runs' spread"), "{text}");
    }

    #[test]
    fn spreads_that_touch_overlap_and_one_hundredth_apart_do_not() {
        let touching = with_spreads((9.9, 10.2), (10.2, 10.6), (9.9, 10.1), (10.3, 10.5));
        assert!(
            touching.contains("by +5%, within the runs' spread (9.90–10.20 µs against 10.20–10.60 µs)"),
            "{touching}"
        );
        let apart = with_spreads((9.9, 10.2), (10.21, 10.6), (9.9, 10.1), (10.3, 10.5));
        assert!(apart.contains("by +5% (inflating is cheap next to the rest)"), "{apart}");
        // Either point may be the lower one.
        let (low, high) = (Spread { median: 1.0, min: 0.9, max: 1.1 }, Spread { median: 2.0, min: 1.9, max: 2.1 });
        assert!(!low.overlaps(&high) && !high.overlaps(&low));
        let wide = Spread { median: 1.5, min: 1.0, max: 2.0 };
        assert!(wide.overlaps(&low) && high.overlaps(&wide));
    }

    #[test]
    fn no_reading_without_the_batch_curve() {
        assert!(reading(&[point("event size", 200, (10.0, 10.0, 10.0))]).is_none());
    }
}
