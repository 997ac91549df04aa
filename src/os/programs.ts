/** Finding the programs the service runs (ffmpeg, Apertium's, bzip2) on the PATH. */
import { accessSync, constants, statSync } from "node:fs";
import path from "node:path";

const EXE = process.platform === "win32" ? ".exe" : "";

/** The executable file `name` in a PATH directory, if there is one. */
export function findOnPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, name + EXE);
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // Not here: keep looking.
    }
  }
  return undefined;
}
