/** Waiting on processes and conditions in tests of model hosts (host processes killed, stopped, replaced). */

/** Whether a process with this pid exists (a stopped one does; a killed one, once reaped, not). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Resolves once `condition` holds, checked every 20 ms; fails naming `what` after `limitMs`. */
export async function until(
  condition: () => boolean | Promise<boolean>,
  what: string,
  limitMs = 30_000,
): Promise<void> {
  const started = Date.now();
  while (!(await condition())) {
    if (Date.now() - started > limitMs) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
