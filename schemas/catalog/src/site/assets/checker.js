// The catalog page's in-browser check: loads the WebAssembly build of the
// gateway's own checker and the catalog's sources (catalog.json), then checks
// what the user pastes. Loaded dynamically so the page still reads fine when
// the WebAssembly build is missing.
const input = document.getElementById('event-input');
const button = document.getElementById('check-button');
const status = document.getElementById('check-status');
const result = document.getElementById('check-result');
let checker = null;

async function load() {
  try {
    const wasm = await import('./wasm/eventgw_schemas_wasm.js');
    await wasm.default({ module_or_path: new URL('./wasm/eventgw_schemas_wasm_bg.wasm', import.meta.url) });
    const sources = await (await fetch(new URL('./catalog.json', import.meta.url))).text();
    checker = new wasm.Checker(sources);
    button.disabled = false;
    status.textContent = 'Checker ready.';
    document.body.dataset.checker = 'ready';
  } catch (error) {
    status.textContent = 'The in-browser check is unavailable (' + error.message + '): run scripts/build-wasm, then eventgw-catalog schemas docs.';
    document.body.dataset.checker = 'unavailable';
  }
}

function show(outcome) {
  result.replaceChildren();
  result.className = outcome.valid ? 'valid' : 'invalid';
  result.dataset.valid = String(outcome.valid);
  const summary = document.createElement('p');
  const what = outcome.event ? outcome.event + (outcome.version ? ' v' + outcome.version : '') : 'the event';
  summary.textContent = outcome.valid
    ? 'Valid: ' + what + ', to topic ' + outcome.topic + ' with key ' + outcome.key + '.'
    : 'Invalid: ' + what + ' breaks its contract' + (outcome.rollout ? ' (rollout: ' + outcome.rollout + ')' : '') + '.';
  result.append(summary);
  if (outcome.errors.length) {
    const list = document.createElement('ul');
    for (const e of outcome.errors) {
      const item = document.createElement('li');
      const where = document.createElement('code');
      where.textContent = e.path || '(event)';
      item.append(where, ' ' + e.message);
      list.append(item);
    }
    result.append(list);
  }
}

button.addEventListener('click', () => checker && show(JSON.parse(checker.check(input.value))));
for (const tryButton of document.querySelectorAll('button.try')) {
  tryButton.addEventListener('click', () => {
    input.value = tryButton.previousElementSibling.textContent;
    input.scrollIntoView({ block: 'center' });
    button.click();
  });
}
load();
