/**
 * The language pairs a LibreTranslate server offers, in relay's language codes. Servers name
 * languages with their own codes ("zh-Hans", "pt-BR", "auto" on some); relay reads them through its
 * one tag parser (src/core/language-tags.ts), so "zh-Hans" serves "zh" and "pt-BR" serves "pt", and drops
 * codes that are not language tags.
 */
import { z } from "zod";
import { parseLanguageTag } from "../../core/language-tags.js";
import type { LanguageCode, TranslationPair } from "../../core/contracts.js";

/**
 * The answer of `GET /languages`. `targets` lists the codes a language translates into; servers
 * older than the field translate every language into every other.
 */
export const languageList = z.array(z.object({ code: z.string(), targets: z.array(z.string()).optional() }));
export type LanguageList = z.output<typeof languageList>;

/** The server's own codes to send for one pair. */
export interface ServerCodes {
  readonly source: string;
  readonly target: string;
}

export interface ServerLanguages {
  readonly pairs: readonly TranslationPair[];
  /** The codes to send for `from` → `to`; undefined when the server does not offer the pair. */
  codes(from: LanguageCode, to: LanguageCode): ServerCodes | undefined;
}

function relayCode(code: string): LanguageCode | undefined {
  const parsed = parseLanguageTag(code);
  return parsed.ok ? parsed.language : undefined;
}

export function serverLanguages(list: LanguageList): ServerLanguages {
  const everyCode = list.map((entry) => entry.code);
  const routes = new Map<string, TranslationPair & ServerCodes & { readonly exact: number }>();
  for (const entry of list) {
    const from = relayCode(entry.code);
    if (from === undefined) continue;
    for (const target of entry.targets ?? everyCode) {
      const to = relayCode(target);
      if (to === undefined || to === from) continue;
      // Several server codes may serve one pair ("pt" and "pt-BR"): the plain code wins, else the first.
      const exact = Number(entry.code === from) + Number(target === to);
      const key = `${from}>${to}`;
      const known = routes.get(key);
      if (!known || exact > known.exact) routes.set(key, { from, to, source: entry.code, target, exact });
    }
  }
  return {
    pairs: Object.freeze([...routes.values()].map(({ from, to }) => ({ from, to }))),
    codes(from, to) {
      const route = routes.get(`${from}>${to}`);
      return route && { source: route.source, target: route.target };
    },
  };
}
