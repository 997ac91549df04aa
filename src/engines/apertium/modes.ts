/**
 * Discovery of installed Apertium translation modes and their null-flush command lines.
 *
 * A mode file (`<modes>/<src>-<tgt>.mode`) is the shell pipeline Apertium runs for one direction. We
 * run the same programs ourselves, each a separate process connected by pipes (Apertium is GPL; it is
 * never linked into this process), with `-z` added to every program so one long-lived pipeline
 * answers request after request.
 */

import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import type { LanguageCode } from "../../core/contracts.js";

/** Where Debian/Ubuntu packages and `make install` put the modes, in that order. */
export const DEFAULT_MODES_DIRS: readonly string[] = [
  "/usr/share/apertium/modes",
  "/usr/local/share/apertium/modes",
];

/**
 * Apertium language codes (ISO 639-3, older ISO 639-1 and a few 639-2/B names) → ISO 639-1.
 * Codes without a 639-1 equivalent (ast, ceb, hbs variants, ...) are absent on purpose: the service
 * only speaks 639-1 primary subtags, so such modes are ignored.
 */
const TO_ISO_639_1: ReadonlyMap<string, LanguageCode> = new Map(
  `
  afr:af amh:am ara:ar arb:ar arg:an aze:az bak:ba bel:be ben:bn bos:bs bre:br bul:bg cat:ca
  ces:cs cze:cs chv:cv cor:kw cos:co cym:cy wel:cy dan:da deu:de ger:de ell:el gre:el eng:en
  epo:eo est:et eus:eu baq:eu fao:fo fas:fa pes:fa per:fa fin:fi fra:fr fre:fr fry:fy gla:gd
  gle:ga glg:gl glv:gv grn:gn guj:gu hat:ht hau:ha heb:he hin:hi hrv:hr hun:hu hye:hy arm:hy
  ibo:ig ido:io ina:ia ind:id isl:is ice:is ita:it jav:jv jpn:ja kan:kn kat:ka geo:ka kaz:kk
  khm:km kin:rw kir:ky kmr:ku kur:ku kor:ko lao:lo lat:la lav:lv lin:ln lit:lt ltz:lb lug:lg
  mal:ml mar:mr mkd:mk mac:mk mlg:mg mlt:mt mon:mn msa:ms may:ms zsm:ms mya:my bur:my nep:ne
  nld:nl dut:nl nno:nn nob:nb nor:no nya:ny oci:oc pan:pa pol:pl por:pt que:qu roh:rm ron:ro
  rum:ro rus:ru sin:si slk:sk slo:sk slv:sl sme:se sna:sn som:so spa:es sqi:sq alb:sq srd:sc
  srp:sr sun:su swa:sw swe:sv tam:ta tat:tt tel:te tgk:tg tgl:tl tha:th tir:ti tuk:tk tur:tr
  uig:ug ukr:uk urd:ur uzb:uz vie:vi wln:wa wol:wo xho:xh yid:yi yor:yo zho:zh chi:zh cmn:zh
  zul:zu
  `
    .trim()
    .split(/\s+/)
    .map((entry) => entry.split(":") as [string, LanguageCode]),
);

/** ISO 639-1 code of an Apertium language code, or undefined when there is none. */
export function toIso639_1(code: string): LanguageCode | undefined {
  if (/^[a-z]{2}$/.test(code)) return code; // old-style pairs (fr-es, es-pt) already use 639-1
  return TO_ISO_639_1.get(code);
}

export interface ModeName {
  /** Mode name as Apertium spells it, e.g. "eng-spa". */
  readonly name: string;
  readonly sourceCode: string;
  readonly targetCode: string;
}

/**
 * Parses `<src>-<tgt>.mode`. Variant modes (`es-pt_BR`, `spa-eng_US`), alternative vocabularies
 * (`eco-es-fr`) and debug/partial modes (`eng-spa-tagger`, `...-morph`) do not match.
 */
export function parseModeFileName(fileName: string): ModeName | undefined {
  const match = /^([a-z]{2,3})-([a-z]{2,3})\.mode$/.exec(fileName);
  if (!match) return undefined;
  return { name: `${match[1]}-${match[2]}`, sourceCode: match[1]!, targetCode: match[2]! };
}

/** Programs that do not accept `-z` (the same exceptions apertium-apy makes). */
const NO_NULL_FLUSH = /^([^\s]*\/)?(vislcg3|cg-mwesplit|hfst-tokeni[sz]e|divvun-suggest)$/;

/** Splits a shell pipeline on `|` outside quotes (mode files single-quote their paths). */
export function splitPipeline(commandLine: string): string[] {
  const parts: string[] = [];
  let current = "";
  let quote: string | undefined;
  for (let i = 0; i < commandLine.length; i++) {
    const c = commandLine[i]!;
    if (c === "\\" && quote !== "'" && i + 1 < commandLine.length) {
      current += c + commandLine[++i]!;
      continue;
    }
    if (quote) {
      if (c === quote) quote = undefined;
    } else if (c === "'" || c === '"') quote = c;
    else if (c === "|") {
      parts.push(current.trim());
      current = "";
      continue;
    }
    current += c;
  }
  parts.push(current.trim());
  return parts.filter((p) => p.length > 0);
}

/** Splits one command into words as sh would; shell syntax beyond quoting is refused. */
export function shellWords(command: string): string[] {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  let quote: string | undefined;
  for (let i = 0; i < command.length; i++) {
    const c = command[i]!;
    if (quote === "'") {
      if (c === "'") quote = undefined;
      else word += c;
    } else if (quote === '"') {
      if (c === '"') quote = undefined;
      else if (c === "\\" && /[\\"$`]/.test(command[i + 1] ?? "")) word += command[++i]!;
      else if (c === "$" || c === "`")
        throw new Error(`unsupported shell syntax in ${JSON.stringify(command)}`);
      else word += c;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
    } else {
      if (/[;&|<>()$`*?[\]{}]/.test(c) || (!inWord && (c === "#" || c === "~"))) {
        throw new Error(`unsupported shell syntax in ${JSON.stringify(command)}`);
      }
      inWord = true;
      if (c === "'" || c === '"') quote = c;
      else if (c === "\\") word += command[++i] ?? "";
      else word += c;
    }
  }
  if (quote) throw new Error(`unterminated quote in ${JSON.stringify(command)}`);
  if (inWord) words.push(word);
  return words;
}

/**
 * The mode's programs (argument vectors) ready for a warm pipeline: `$1` (generator mode) becomes
 * `-n`, unmarked generation as `apertium -u` does (marks would block post-generation contractions
 * such as Portuguese "de o" → "do"), other `$n` (tagger options) become empty, and every program
 * gets `-z` right after its name. Throws on shell syntax a mode file should not need.
 */
export function nullFlushCommands(modeText: string): string[][] {
  const line = modeText.replace(/\r?\n/g, " ").trim();
  return splitPipeline(line).map((command) => {
    const [program, ...args] = shellWords(command.replace(/\$1\b/g, "-n").replace(/\$\d\b/g, ""));
    if (!program) throw new Error(`empty command in ${JSON.stringify(line)}`);
    return NO_NULL_FLUSH.test(program) ? [program, ...args] : [program, "-z", ...args];
  });
}

/**
 * The data package a mode belongs to: the directory holding its first data file, e.g.
 * `/usr/share/apertium/apertium-eng-spa/eng-spa.automorf.bin` → "apertium-eng-spa".
 */
export function dataPackageOf(modeText: string): string | undefined {
  const match = /'?(\/[^'\s|]+\/)[^'\s/|]+'?/.exec(modeText);
  if (!match) return undefined;
  const dir = path.basename(match[1]!);
  return dir.startsWith("apertium-") ? dir : undefined;
}

export interface DiscoveredMode extends ModeName {
  readonly from: LanguageCode;
  readonly to: LanguageCode;
  readonly file: string;
  /** Programs of the pipeline (argument vectors) with null flush on each. */
  readonly commands: readonly (readonly string[])[];
  /** Debian/source package name of the linguistic data, when recognizable. */
  readonly dataPackage: string | undefined;
}

export interface Discovery {
  readonly modes: readonly DiscoveredMode[];
  /** Modes whose command line could not be turned into programs. */
  readonly skipped: readonly { readonly name: string; readonly reason: string }[];
}

/** Whether `name` follows the newer ISO 639-3 naming (preferred when two modes give one pair). */
function isThreeLetter(mode: ModeName): boolean {
  return mode.sourceCode.length === 3 && mode.targetCode.length === 3;
}

/**
 * All directly translatable pairs in `modesDir`, one mode per ISO pair. When both an old
 * (`en-es`) and a new (`eng-spa`) mode give the same pair, the newer naming wins.
 */
export async function discoverModes(modesDir: string): Promise<Discovery> {
  const entries = (await readdir(modesDir)).sort();
  const byPair = new Map<string, DiscoveredMode>();
  const skipped: { name: string; reason: string }[] = [];
  for (const entry of entries) {
    const parsed = parseModeFileName(entry);
    if (!parsed) continue;
    const from = toIso639_1(parsed.sourceCode);
    const to = toIso639_1(parsed.targetCode);
    if (!from || !to || from === to) continue;
    const file = path.join(modesDir, entry);
    const text = (await readFile(file, "utf8")).trim();
    if (!text) continue;
    let commands: string[][];
    try {
      commands = nullFlushCommands(text);
    } catch (error) {
      skipped.push({ name: parsed.name, reason: error instanceof Error ? error.message : String(error) });
      continue;
    }
    const mode: DiscoveredMode = { ...parsed, from, to, file, commands, dataPackage: dataPackageOf(text) };
    const key = `${from}>${to}`;
    const existing = byPair.get(key);
    if (!existing || (isThreeLetter(mode) && !isThreeLetter(existing))) byPair.set(key, mode);
  }
  const modes = [...byPair.values()].sort((a, b) => a.from.localeCompare(b.from) || a.to.localeCompare(b.to));
  return { modes, skipped };
}
