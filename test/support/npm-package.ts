/**
 * A workspace package as users get it, for the tests of packages/*: built from its sources into a
 * copy, packed as npm publishes it, and installed into empty projects with no registry.
 */
import { execFile } from "node:child_process";
import { copyFile, mkdir, readFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { PROJECT_ROOT } from "./run-script.js";

const execFileAsync = promisify(execFile);

/** The workspace's compiler: the projects under test install nothing but the packages. */
export const TSC = path.join(PROJECT_ROOT, "node_modules", "typescript", "bin", "tsc");

/** Runs a command; a failure says what it printed (tsc reports on stdout). */
export async function run(
  command: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<{ stdout: string; stderr: string }> {
  try {
    return await execFileAsync(command, args, { ...options, maxBuffer: 16 * 1024 * 1024 });
  } catch (error) {
    const { stdout = "", stderr = "" } = error as { stdout?: string; stderr?: string };
    throw new Error(`${path.basename(command)} ${args.join(" ")} failed:\n${stdout}${stderr}`, {
      cause: error,
    });
  }
}

export interface Packed {
  /** The built copy that was packed (where `npm publish --dry-run` runs). */
  readonly copy: string;
  readonly tarball: string;
  /** The tarball's files, sorted. */
  readonly files: string[];
  readonly size: number;
}

/** `npm pack` of a folder into `dir`. */
async function packFolder(folder: string, dir: string): Promise<Omit<Packed, "copy">> {
  const { stdout } = await run(
    "npm",
    ["pack", "--json", "--ignore-scripts", "--pack-destination", dir, folder],
    {
      cwd: dir,
    },
  );
  const [made] = JSON.parse(stdout) as { filename: string; size: number; files: { path: string }[] }[];
  return {
    tarball: path.join(dir, made!.filename),
    files: made!.files.map((file) => file.path).sort(),
    size: made!.size,
  };
}

/** Builds a workspace package from its sources into `dir/<name>` and packs that (its own dist is left alone). */
export async function packFromSources(packageDir: string, dir: string, name: string): Promise<Packed> {
  const copy = path.join(dir, name);
  await mkdir(copy);
  await run(process.execPath, [
    TSC,
    "-p",
    path.join(packageDir, "tsconfig.json"),
    "--outDir",
    `${copy}/dist`,
  ]);
  for (const file of ["package.json", "README.md", "LICENSE"])
    await copyFile(path.join(packageDir, file), path.join(copy, file));
  return { copy, ...(await packFolder(copy, dir)) };
}

/** A package of the workspace's node_modules (or a built workspace package) as a tarball in `dir`. */
export async function packInstalled(folder: string, dir: string): Promise<string> {
  return (await packFolder(folder, dir)).tarball;
}

/** `npm publish --dry-run` of a packed copy: what npm prints, and its warnings (logging in aside). */
export async function publishDryRun(copy: string): Promise<{ output: string; warnings: string[] }> {
  const { stdout, stderr } = await run("npm", ["publish", "--dry-run", "--ignore-scripts"], { cwd: copy });
  const output = `${stdout}${stderr}`;
  // Logging in is the publisher's business, not the package's.
  const warnings = output
    .split("\n")
    .filter((line) => /^npm warn/iu.test(line) && !/requires you to be logged in/u.test(line));
  return { output, warnings };
}

/** The packages an app's install put in its node_modules, sorted. */
export async function installedPackages(app: string): Promise<string[]> {
  const lock = JSON.parse(await readFile(path.join(app, "node_modules", ".package-lock.json"), "utf8")) as {
    packages: Record<string, unknown>;
  };
  return Object.keys(lock.packages)
    .map((key) => key.replace(/^.*node_modules\//u, ""))
    .sort();
}
