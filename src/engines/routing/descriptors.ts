import type { z } from "zod";
import type {
  EngineDefaults,
  EngineKind,
  EngineOfKind,
  EngineRole,
  FamilyEnvironment,
  ServiceFacts,
} from "../kit/descriptor.js";
import { descriptor as pocketsphinx } from "../pocketsphinx/descriptor.js";
import { descriptor as whisperCpp } from "../whisper-cpp/descriptor.js";
import { descriptor as apertium } from "../apertium/descriptor.js";
import { descriptor as transformersJs } from "../transformers-js/descriptor.js";
import { descriptor as espeakNg } from "../espeak-ng/descriptor.js";
import { descriptor as svoxPico } from "../svox-pico/descriptor.js";
import { descriptor as sherpaOnnx } from "../sherpa-onnx/descriptor.js";
import { descriptor as openai } from "../openai/descriptor.js";
import { descriptor as libretranslate } from "../libretranslate/descriptor.js";
import { descriptor as openvoice } from "../openvoice/descriptor.js";

/**
 * Every engine the engines file (src/engines/routing/engine-config.ts) can name, in one table: each
 * family's descriptor (its folder's descriptor.ts: for each kind it serves, the schema of its
 * entries and the factory that builds it). The zod unions of ENGINES_FILE, the names ASR_ENGINES /
 * MT_ENGINES / TTS_ENGINES accept without a file entry, and the registry's construction
 * (src/engines/routing/registry.ts) are all derived from this table; adding an engine family means
 * its folder and one entry here (see docs/architecture.md).
 *
 * Engine modules are imported only when an engine is configured, so reading the configuration loads
 * no engine (several have native or heavy dependencies).
 */

export type { EngineDefaults, EngineKind, EngineOfKind, EngineRole } from "../kit/descriptor.js";

/** The table: one entry per engine, in the order the unions and the name lookup list them. */
export const ENGINE_DESCRIPTORS = [
  pocketsphinx,
  whisperCpp,
  apertium,
  transformersJs,
  espeakNg,
  svoxPico,
  sherpaOnnx,
  openai,
  libretranslate,
  openvoice,
] as const;

type Descriptor = (typeof ENGINE_DESCRIPTORS)[number];

/** The families that read environment variables of their own. */
function environments(): FamilyEnvironment[] {
  return ENGINE_DESCRIPTORS.flatMap((descriptor) =>
    "environment" in descriptor ? [descriptor.environment as FamilyEnvironment] : [],
  );
}

/** Every family's environment variables, for the service's one environment schema (src/config.ts). */
export function familyVariables(): z.ZodRawShape {
  return Object.assign({}, ...environments().map((family) => family.variables)) as z.ZodRawShape;
}

/** Each family's settings from the validated environment, by family id (`EngineDefaults.families`). */
export function familySettingsFrom(
  values: Readonly<Record<string, unknown>>,
  service: ServiceFacts,
): Record<string, unknown> {
  return Object.fromEntries(
    environments().map((family) => [family.family, family.settings(values as never, service)]),
  );
}

/** The roles of one kind, over every engine that serves it. */
type RoleOf<K extends EngineKind> = Descriptor extends infer D
  ? D extends { [P in K]: infer R }
    ? R
    : never
  : never;

/** The schemas of the entries of one kind (the members of its union in the engines file). */
export type SchemaOf<K extends EngineKind> = RoleOf<K> extends EngineRole<infer S, unknown> ? S : never;

/** One entry of the engines file of kind K, as validated. */
export type SpecOf<K extends EngineKind> = z.output<SchemaOf<K>>;

/** The roles of one kind with their engine's name, in table order. */
function rolesOf(kind: EngineKind): { id: string; role: EngineRole }[] {
  return ENGINE_DESCRIPTORS.flatMap((descriptor) => {
    const role = (descriptor as Partial<Record<EngineKind, EngineRole>>)[kind];
    return role ? [{ id: descriptor.id, role }] : [];
  });
}

// An entry's `engine` must be its engine's name (the schemas' literals are what the file names).
for (const kind of ["asr", "mt", "tts"] as const) {
  for (const { id, role } of rolesOf(kind)) {
    if (role.schema.shape.engine.value !== id)
      throw new Error(`engine descriptor ${id}: ${kind} schema names another engine`);
  }
}

/** The schemas of one kind, for its `z.discriminatedUnion("engine", …)` (every kind has engines). */
export function schemasOf<K extends EngineKind>(kind: K): [SchemaOf<K>, ...SchemaOf<K>[]] {
  return rolesOf(kind).map(({ role }) => role.schema) as unknown as [SchemaOf<K>, ...SchemaOf<K>[]];
}

/**
 * Engines of one kind that need nothing but their name (an env list may name them without a file
 * entry): those whose schema accepts `{ engine: name }` alone.
 */
export function namedOnly<K extends EngineKind>(kind: K): Record<string, SpecOf<K>> {
  const found: Record<string, SpecOf<K>> = {};
  for (const { id, role } of rolesOf(kind)) {
    if (role.schema.safeParse({ engine: id }).success) found[id] = { engine: id } as SpecOf<K>;
  }
  return found;
}

/** Builds the engine an entry of kind `kind` describes. */
export function createEngine<K extends EngineKind>(
  kind: K,
  spec: SpecOf<K>,
  defaults: EngineDefaults,
): Promise<EngineOfKind[K]> {
  const found = rolesOf(kind).find(({ id }) => id === spec.engine);
  if (!found) return Promise.reject(new Error(`no ${kind} engine "${spec.engine}"`));
  return found.role.create(spec, defaults) as Promise<EngineOfKind[K]>;
}
