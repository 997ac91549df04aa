/**
 * The Node versions package.json accepts are the ones every dependency supports: `npm ci` (setup)
 * warns EBADENGINE for each installed package whose `engines.node` the running Node is outside of.
 * Read from package-lock.json, as `npm ci` installs it; packages for other platforms are not
 * installed here and not checked. Also: the tarballs `npm pack` leaves in the checkout are ignored.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../support/run-script.js";

const semver = createRequire(import.meta.url)("semver") as {
  satisfies(version: string, range: string): boolean;
  minVersion(range: string): { version: string } | null;
};

interface LockedPackage {
  readonly version?: string;
  readonly engines?: { readonly node?: string };
  readonly os?: readonly string[];
  readonly cpu?: readonly string[];
  readonly libc?: readonly string[];
}

const lock = JSON.parse(readFileSync(path.join(PROJECT_ROOT, "package-lock.json"), "utf8")) as {
  packages: Record<string, LockedPackage>;
};
const manifest = JSON.parse(readFileSync(path.join(PROJECT_ROOT, "package.json"), "utf8")) as {
  engines: { node: string };
};

/** npm's rule for `os`, `cpu` and `libc`: listed values allow, `!value` excludes. */
function allows(list: readonly string[] | undefined, value: string): boolean {
  if (!list) return true;
  if (list.includes(`!${value}`)) return false;
  return list.includes(value) || list.every((entry) => entry.startsWith("!"));
}

const libc = (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header
  .glibcVersionRuntime
  ? "glibc"
  : "musl";
const installedHere = (locked: LockedPackage) =>
  allows(locked.os, process.platform) && allows(locked.cpu, process.arch) && allows(locked.libc, libc);

describe("the Node versions relay states", () => {
  const stated = manifest.engines.node;
  // The first version of each line package.json accepts, and the one running the tests.
  const versions = [
    ...stated.split("||").map((part) => semver.minVersion(part)!.version),
    process.versions.node,
  ];

  it("are what package-lock.json records and include the Node running the tests", () => {
    expect(lock.packages[""]?.engines?.node).toBe(stated);
    expect(semver.satisfies(process.versions.node, stated)).toBe(true);
  });

  it("are supported by every package setup installs here (no EBADENGINE from npm ci)", () => {
    const unsupported = Object.entries(lock.packages).flatMap(([where, locked]) => {
      const range = locked.engines?.node;
      if (!where || !range || !installedHere(locked)) return [];
      const outside = versions.filter((version) => !semver.satisfies(version, range));
      return outside.length ? [`${where}@${locked.version}: node ${range} (not ${outside.join(", ")})`] : [];
    });
    expect(unsupported).toEqual([]);
  });
});

describe("the checkout", () => {
  it("ignores the tarballs npm pack writes into it", () => {
    const ignored = execFileSync(
      "git",
      [
        "check-ignore",
        "relay-translate-client-0.1.0.tgz",
        "packages/client/relay-translate-client-0.1.0.tgz",
      ],
      { cwd: PROJECT_ROOT, encoding: "utf8" },
    );
    expect(ignored.trim().split("\n")).toHaveLength(2);
  });
});
