/** Where the database lives, parsed from `DATABASE_URL`-style strings. */
export type DatabaseLocation =
  | { readonly kind: "sqlite"; readonly path: string }
  | { readonly kind: "postgres"; readonly connectionString: string };

/**
 * `sqlite:<path>` (relative or absolute; `sqlite:///abs/path` also accepted), `sqlite::memory:` for an
 * in-memory database, or `postgres://user@host:port/db` / `postgresql://…` (passed to pg unchanged).
 */
export function parseDatabaseUrl(url: string): DatabaseLocation {
  const trimmed = url.trim();
  if (/^postgres(ql)?:\/\//iu.test(trimmed)) return { kind: "postgres", connectionString: trimmed };
  const sqlite = /^sqlite:(.*)$/isu.exec(trimmed);
  if (sqlite) {
    // `sqlite://x` is the URL-ish spelling of `sqlite:x`; `sqlite:///abs` thus keeps its leading slash.
    const rest = sqlite[1]!.startsWith("//") ? sqlite[1]!.slice(2) : sqlite[1]!;
    if (rest === "") throw new Error(`invalid database URL "${url}": missing SQLite file path`);
    return { kind: "sqlite", path: rest };
  }
  throw new Error(
    `unsupported database URL "${redact(url)}" (expected sqlite:<path>, sqlite::memory: or postgres://…)`,
  );
}

/** Hides a password before a URL goes into an error message. */
function redact(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/u, "//$1:***@");
}
