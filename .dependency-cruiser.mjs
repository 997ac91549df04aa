/**
 * Import rules for src/, checked by `npm run lint:deps` (part of `npm run lint`, so of `npm test`).
 *
 * 1. no-circular: no module reaches itself through its imports. Type-only imports count
 *    (tsPreCompilationDeps): a type cycle still ties the modules' designs together.
 * 2. engines-not-to-config: engines (src/engines/**) get their settings from the code that builds
 *    them (src/engines/routing/engine-config.ts describes those settings); they never read the service's
 *    configuration (src/config.ts).
 * 3. nothing-to-api: only the entry points (src/api/**, src/main.ts, src/app*.ts, src/cli/**) use
 *    the HTTP layer; domain code, engines included, never imports src/api/**.
 * 4. dubbing-only-storage-interface: dubbing works against the storage interface
 *    (src/storage/types.ts), never a back-end (local disk, S3: chosen at start-up by src/services.ts).
 * 5. configuration-loads-no-engine: reading the configuration imports no engine's index.ts (several
 *    load native addons); it reads the descriptor table (which imports an engine when it is built)
 *    and the families' catalogues.
 * 6. The layers only point down: core (imports nothing of ours) < audio < engines/kit < voices <
 *    engine families (each in one folder) < engines/routing < speakers < pipeline < surfaces
 *    (api, rooms, dubbing, cli). Rules 6a–6f state what each lower layer may import.
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
      comment:
        "Reading the configuration loads no engine: it reads the descriptors and catalogues, never an engine's index.ts.",
      from: { path: "^src/(config[.]ts$|engines/routing/engine-config[.]ts$)" },
      to: { path: "^src/engines/[^/]+/index[.]ts$" },
    },
    {
      name: "dubbing-library-has-no-service",
      severity: "error",
      comment:
        "Dubbing's media and stages are a library: no service wiring, configuration, database or storage (jobs/ has those).",
      from: { path: "^src/dubbing/(media|stages)/" },
      to: {
        path: "^src/(services|config|app[^/]*)[.]ts$|^src/(db|storage|api|sessions|fleet)/|^src/dubbing/jobs/",
      },
    },
    {
      name: "core-imports-nothing",
      severity: "error",
      comment:
        "src/core/ (contracts, language tags, cancellation, channels, queues) imports nothing of ours.",
      from: { path: "^src/core/" },
      to: { path: "^src/", pathNot: "^src/core/" },
    },
    {
      name: "audio-on-core",
      severity: "error",
      comment: "Signal code (src/audio/) builds on core only.",
      from: { path: "^src/audio/" },
      to: { path: "^src/", pathNot: "^src/(core|audio)/" },
    },
    {
      name: "kit-on-core-and-audio",
      severity: "error",
      comment: "What engine families share (src/engines/kit/) builds on core, audio and the OS helpers only.",
      from: { path: "^src/engines/kit/" },
      to: { path: "^src/", pathNot: "^src/(core|audio|os|engines/kit)/" },
    },
    {
      name: "families-stay-in-their-folder",
      severity: "error",
      comment:
        "An engine family imports core, audio, the kit, the voice library and its own folder: adding one touches one folder (and one line of the routing table).",
      from: { path: "^src/engines/([^/]+)/", pathNot: "^src/engines/(kit|routing)/" },
      to: {
        path: "^src/",
        pathNot: ["^src/(core|audio|os|voices)/", "^src/engines/kit/", "^src/engines/$1/"],
      },
    },
    {
      name: "voices-below-engines",
      severity: "error",
      comment:
        "The voice library, measurement and matching build on core and audio only (engines import them).",
      from: { path: "^src/voices/" },
      to: { path: "^src/", pathNot: "^src/(core|audio|voices)/" },
    },
    {
      name: "speakers-on-voices",
      severity: "error",
      comment: "Who speaks, and which voice they get, builds on core, audio and voices only.",
      from: { path: "^src/speakers/" },
      to: { path: "^src/", pathNot: "^src/(core|audio|voices|speakers)/" },
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
