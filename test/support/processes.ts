/** Processes in tests of model hosts (killed, stopped, replaced). */

/** Whether a process with this pid exists (a stopped one does; a killed one, once reaped, not). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
