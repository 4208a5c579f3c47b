// checks.mjs — what the browser tier's scripts share: one "ok - NAME" or "not ok - NAME"
// line per check (test/tiers/browser.sh counts them), the first lines of why under it.
export async function check(name, fn) {
  try {
    await fn();
    console.log('ok - ' + name);
  } catch (e) {
    console.log('not ok - ' + name);
    console.log('    ' + String(e && e.message ? e.message : e).split('\n').slice(0, 6).join('\n    '));
  }
}

export function expect(cond, what) {
  if (!cond) throw new Error(what);
}
