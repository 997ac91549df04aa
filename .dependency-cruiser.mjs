/**
 * Import rules for src/, checked by `npm run lint:deps` (part of `npm run lint`, so of `npm test`).
 *
 * 1. no-circular: no module reaches itself through its imports. Type-only imports count
 *    (tsPreCompilationDeps): a type cycle still ties the modules' designs together.
 * 2. engines-not-to-config: engines (src/engines/**) get their settings from the code that builds
 *    them (src/engine-config.ts describes those settings); they never read the service's
 *    configuration (src/config.ts).
 * 3. nothing-to-api: only the entry points (src/api/**, src/main.ts, src/app*.ts, src/cli/**) use
 *    the HTTP layer; domain code, engines included, never imports src/api/**.
 * 4. dubbing-only-storage-interface: dubbing works against the storage interface
 *    (src/storage/types.ts), never a back-end (local disk, S3: chosen at start-up by src/services.ts).
 * 5. configuration-loads-no-engine: reading the configuration imports no engine module (several load
 *    native addons); only the descriptor table, which imports an engine when it is built, and types.
 */

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment: "A module reaches itself through its imports (type-only imports included).",
      from: {},
      to: { circular: true },
    },
    {
      name: "engines-not-to-config",
      severity: "error",
      comment: "Engines get their settings from the code that builds them, never from src/config.ts.",
      from: { path: "^src/engines/" },
      to: { path: "^src/config[.]ts$" },
    },
    {
      name: "nothing-to-api",
      severity: "error",
      comment:
        "Domain code (engines included) never imports the HTTP layer; only the entry points and the CLI do.",
      from: { pathNot: "^src/(api/|cli/|main[.]ts$|app[^/]*[.]ts$)" },
      to: { path: "^src/api/" },
    },
    {
      name: "dubbing-only-storage-interface",
      severity: "error",
      comment: "Dubbing uses the storage interface only; the back-end is chosen at start-up.",
      from: { path: "^src/dubbing/" },
      to: { path: "^src/storage/", pathNot: "^src/storage/types[.]ts$" },
    },
    {
      name: "configuration-loads-no-engine",
      severity: "error",
      comment: "Reading the configuration loads no engine: engines are imported where they are built.",
      from: { path: "^src/(config|engine-config)[.]ts$" },
      to: { path: "^src/engines/", pathNot: "^src/engines/(descriptors|types)[.]ts$" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    // Type-only imports are dependencies too.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { extensions: [".ts", ".js", ".mjs", ".cjs", ".json"] },
  },
};
