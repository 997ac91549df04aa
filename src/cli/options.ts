import { constants } from "node:fs";
import { access, readFile, stat } from "node:fs/promises";
import path from "node:path";
import { CliError } from "./network.js";

/** Options the commands check before a session or a job is paid for. */

/**
 * Refuses an output path the command could not write, before a session or a job is paid for: it
 * must not be a directory, its directory must exist and be writable, and an existing file writable.
 */
export async function checkOutputPath(out: string, flag = "--out"): Promise<void> {
  const directory = path.dirname(path.resolve(out));
  if ((await stat(out).catch(() => undefined))?.isDirectory())
    throw new CliError(`${flag} ${out} is a directory; name a file to write`);
  if (!(await stat(directory).catch(() => undefined))?.isDirectory())
    throw new CliError(`${flag}: the directory ${directory} does not exist`);
  for (const [target, what] of [
    [directory, `the directory ${directory}`],
    [out, out],
  ] as const) {
    await access(target, constants.W_OK).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== "ENOENT") throw new CliError(`${flag}: cannot write to ${what} (${error.code})`);
    });
  }
}

/** `--context` or `--context-file` (not both): the session's or job's context. */
export async function contextOption(options: {
  readonly context?: string;
  readonly contextFile?: string;
}): Promise<string | undefined> {
  if (options.context !== undefined && options.contextFile !== undefined)
    throw new CliError("pass --context or --context-file, not both");
  if (options.contextFile === undefined) return options.context;
  try {
    return await readFile(options.contextFile, "utf8");
  } catch (error) {
    throw new CliError(`cannot read --context-file ${options.contextFile}: ${(error as Error).message}`);
  }
}
