/**
 * Voice measurements kept on disk (`DATA_DIR/voice-measurements/`), so the library is measured once
 * per engine build rather than once per process: the first dubbing job or `voiceId=auto` session of
 * a process matches voices as soon as later ones do (measuring costs ~5 s per language pair with
 * eSpeak NG).
 *
 * One JSON file per engine id, naming the engine version its entries were measured with; a file of
 * another version is ignored and replaced by the current version's entries. Files are replaced
 * atomically (written aside, then renamed), so no process reads a torn file; a file that does not
 * parse counts as empty and is rewritten. Bounded by construction: one file per configured TTS
 * engine, one entry per (voice timbre, language) the cloner measures.
 */
import { randomBytes } from "node:crypto";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import type { EngineInfo, LanguageCode, VoiceTimbre } from "../core/contracts.js";
import type { VoiceFeatures } from "./voice-features.js";

/** What was measured: the features, or null when the engine's speech held nothing measurable. */
export type StoredMeasurement = VoiceFeatures | null;

/**
 * The file format and the analysis behind its figures: raise it when voice-features.ts measures
 * differently, so measurements made by the old code are made again.
 */
const FORMAT = 1;

const featuresSchema = z.object({
  medianF0Hz: z.number(),
  f0SpreadSemitones: z.number(),
  syllablesPerSecond: z.number(),
  voicedSeconds: z.number(),
  formantSpacingHz: z.number().optional(),
});

const fileSchema = z.object({
  format: z.literal(FORMAT),
  engine: z.string(),
  version: z.string(),
  measurements: z.record(z.string(), featuresSchema.nullable()),
});

/** The key of one measurement: everything about the request that changes what the engine renders. */
export function measurementKey(timbre: VoiceTimbre, language: LanguageCode): string {
  const accent = timbre.accentLocales?.[language] ?? "";
  return [language, timbre.variant, timbre.pitch, timbre.pitchRange, timbre.rate, accent].join("|");
}

export class VoiceMeasurementStore {
  /** Writes of this process, one at a time, so none overwrites another's entries. */
  private writing: Promise<void> = Promise.resolve();

  constructor(readonly dir: string) {}

  /** The stored measurements of `engine` at its current version (empty when there are none). */
  async read(engine: EngineInfo): Promise<Map<string, StoredMeasurement>> {
    let text: string;
    try {
      text = await readFile(this.fileOf(engine), "utf8");
    } catch {
      return new Map();
    }
    let parsed: z.infer<typeof fileSchema> | undefined;
    try {
      parsed = fileSchema.parse(JSON.parse(text));
    } catch {
      // Corrupt or of an older format: measured again and rewritten.
      return new Map();
    }
    if (parsed.engine !== engine.id || parsed.version !== engine.version) return new Map();
    return new Map(Object.entries(parsed.measurements));
  }

  /**
   * Adds `entries` to `engine`'s file, keeping what the file already holds for this version (another
   * process may have measured other languages meanwhile).
   */
  write(engine: EngineInfo, entries: ReadonlyMap<string, StoredMeasurement>): Promise<void> {
    const next = this.writing.then(async () => {
      const merged = new Map([...(await this.read(engine)), ...entries]);
      const file = this.fileOf(engine);
      const temporary = `${file}.${process.pid}-${randomBytes(4).toString("hex")}.tmp`;
      const content = {
        format: FORMAT,
        engine: engine.id,
        version: engine.version,
        measurements: Object.fromEntries(merged),
      };
      await mkdir(this.dir, { recursive: true });
      try {
        await writeFile(temporary, `${JSON.stringify(content)}\n`);
        await rename(temporary, file);
      } catch (error) {
        await rm(temporary, { force: true });
        throw error;
      }
    });
    this.writing = next.catch(() => undefined);
    return next;
  }

  private fileOf(engine: EngineInfo): string {
    return path.join(this.dir, `${encodeURIComponent(engine.id)}.json`);
  }
}

const stores = new Map<string, VoiceMeasurementStore>();

/** The store of a directory: one per directory in a process, so its writes are serialized. */
export function voiceMeasurementStore(dir: string): VoiceMeasurementStore {
  const resolved = path.resolve(dir);
  let store = stores.get(resolved);
  if (!store) {
    store = new VoiceMeasurementStore(resolved);
    stores.set(resolved, store);
  }
  return store;
}
