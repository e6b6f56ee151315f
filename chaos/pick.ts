/**
 * Small pieces the chaos loops and clients share: one weighted choice for the fault menus, one lenient
 * reading of an answer's body for the histories.
 */

/** Runs one entry of `menu`, chosen with probability weight / total weights (`random` in [0, 1)). */
export function pickWeighted<T>(menu: readonly (readonly [number, () => T])[], random: () => number): T | undefined {
  const total = menu.reduce((s, [w]) => s + w, 0);
  let r = random() * total;
  for (const [weight, run] of menu) {
    r -= weight;
    if (r < 0) return run();
  }
  return undefined;
}

/** An answer's body as the history keeps it: undefined when empty, the JSON when it parses, else its first 200 characters. */
export function parseBodyLoose(text: string): unknown {
  try {
    return text === '' ? undefined : JSON.parse(text);
  } catch {
    return text.slice(0, 200);
  }
}
