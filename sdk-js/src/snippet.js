// The loader to paste into a page (the build minifies it to dist/snippet.min.js).
// It defines the API synchronously, so calls made before the SDK arrives are
// queued with their time, and loads the SDK without blocking the page.
(function (w, d) {
  var a = (w.eventgw = w.eventgw || { q: [] });
  if (a.load) return; // pasted twice
  "track page identify group alias reset consent flush".split(" ").forEach(function (m) {
    a[m] = function () {
      a.q.push([m, [].slice.call(arguments), Date.now()]);
    };
  });
  a.load = function (key, opts) {
    if (a.k) return;
    a.k = key;
    a.o = opts = opts || {};
    var s = d.createElement("script");
    s.async = true;
    s.src = opts.src || "/eventgw.min.js";
    d.head.appendChild(s);
  };
})(window, document);
