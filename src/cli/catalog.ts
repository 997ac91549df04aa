import { languageName } from "../core/language-tags.js";
import type { RecognitionTier } from "../engines/routing/languages.js";
import { printTable } from "./output.js";
import { getJson, type Connection } from "./session.js";

/** The listings' shapes as this client reads them (fields it does not print are left out). */
interface Voice {
  readonly id: number;
  readonly name: string;
  readonly gender: string;
  readonly strong_accent?: boolean;
}

interface LanguagesReport {
  readonly recognition: readonly { language: string; engine: string }[];
  readonly translation: readonly { from: string; to: string; via: string | null }[];
  readonly voice_output: readonly { language: string; engine: string }[];
  readonly engines: readonly { kind: string; id: string; version: string }[];
  /** Absent from servers older than this client. */
  readonly recognition_tier?: RecognitionTier;
}

/** `relay voices`: GET /v1/voices as a table. */
export async function voices(connection: Connection, gender: string | undefined): Promise<number> {
  const query = gender ? `?gender=${encodeURIComponent(gender)}` : "";
  const { voices } = (await getJson(connection, `/v1/voices${query}`)) as { voices: Voice[] };
  const rows = voices.map((v) => [String(v.id), v.name, v.gender, v.strong_accent ? "strong accent" : ""]);
  printTable(["ID", "NAME", "GENDER", "NOTE"], rows);
  console.log(`${voices.length} voices`);
  return 0;
}

/** `relay languages`: GET /v1/languages as what can be spoken, translated and voiced. */
export async function languages(connection: Connection): Promise<number> {
  const report = (await getJson(connection, "/v1/languages")) as LanguagesReport;
  const tier = report.recognition_tier;
  if (tier) console.log(`${tier.summary}${tier.upgrade ? `\n  for more: ${tier.upgrade}` : ""}`);
  const spoken = report.recognition.map((r) => `${r.language} (${languageName(r.language)})`);
  console.log(`Speech input (--from; ${count(spoken.length, "language")}):`);
  console.log(spoken.length > 0 ? wrap(spoken, ", ", 100, "  ") : "  none");

  console.log("Translation (--from → --to):");
  const targets = new Map<string, string[]>();
  for (const { from, to, via } of report.translation) {
    targets.set(from, [...(targets.get(from) ?? []), via ? `${to} (via ${via})` : to]);
  }
  for (const [from, list] of targets) console.log(`  ${from} → ${list.join(", ")}`);

  const voiced = report.voice_output.map((v) => v.language);
  console.log(`Voice output (--to without --no-audio, and of speak; ${count(voiced.length, "language")}):`);
  console.log(wrap(voiced, " ", 100, "  "));

  console.log("Engines:");
  for (const engine of report.engines)
    console.log(`  ${engine.kind.padEnd(4)} ${engine.id} ${engine.version}`);
  return 0;
}

const count = (n: number, noun: string) => `${n} ${noun}${n === 1 ? "" : "s"}`;

/** Items joined by `separator` in lines of at most `width` characters (an item is never split). */
function wrap(items: readonly string[], separator: string, width: number, indent: string): string {
  const lines: string[] = [];
  let line = "";
  for (const item of items) {
    if (line && indent.length + line.length + separator.length + item.length > width) {
      lines.push(indent + line + separator.trimEnd());
      line = item;
    } else {
      line = line ? `${line}${separator}${item}` : item;
    }
  }
  if (line) lines.push(indent + line);
  return lines.join("\n");
}
