import { readdir } from "node:fs/promises";
import path from "node:path";

/**
 * SVOX Pico lingware: per locale a text-analysis file `<locale>_ta.bin` and a signal-generation
 * (speaker) file `<locale>_<speaker>_sg.bin`. These are the files Pico has ever shipped with.
 */
export const KNOWN_LINGWARE: readonly { locale: string; ta: string; sg: string }[] = [
  { locale: "en-US", ta: "en-US_ta.bin", sg: "en-US_lh0_sg.bin" },
  { locale: "en-GB", ta: "en-GB_ta.bin", sg: "en-GB_kh0_sg.bin" },
  { locale: "de-DE", ta: "de-DE_ta.bin", sg: "de-DE_gl0_sg.bin" },
  { locale: "es-ES", ta: "es-ES_ta.bin", sg: "es-ES_zl0_sg.bin" },
  { locale: "fr-FR", ta: "fr-FR_ta.bin", sg: "fr-FR_nk0_sg.bin" },
  { locale: "it-IT", ta: "it-IT_ta.bin", sg: "it-IT_cm0_sg.bin" },
];

export interface LingwarePair {
  /** e.g. "en-GB" */
  readonly locale: string;
  /** ISO 639-1 code, e.g. "en" */
  readonly language: string;
  readonly taPath: string;
  readonly sgPath: string;
}

/** Finds complete ta + sg pairs in `dir`. Throws, naming the expected files, when there is none. */
export async function findLingware(dir: string): Promise<LingwarePair[]> {
  const expected = KNOWN_LINGWARE.map((l) => `${l.ta} + ${l.sg}`).join(", ");
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    throw new Error(
      `SVOX Pico lingware directory ${dir} is not readable (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); ` +
        `expected any of: ${expected}`,
      { cause: error },
    );
  }
  const pairs: LingwarePair[] = [];
  for (const name of names.sort()) {
    const match = /^([a-z]{2})-([A-Z]{2})_ta\.bin$/.exec(name);
    if (!match) continue;
    const locale = `${match[1]}-${match[2]}`;
    // Any speaker file of the locale will do; the shipped lingware has exactly one per locale.
    const sg = names.find((n) => n.startsWith(`${locale}_`) && n.endsWith("_sg.bin"));
    if (sg)
      pairs.push({ locale, language: match[1]!, taPath: path.join(dir, name), sgPath: path.join(dir, sg) });
  }
  if (pairs.length === 0) {
    const missing = KNOWN_LINGWARE.flatMap((l) => [l.ta, l.sg]).filter((f) => !names.includes(f));
    throw new Error(
      `SVOX Pico lingware directory ${dir} has no complete language; missing: ${missing.join(", ")}`,
    );
  }
  return pairs;
}
