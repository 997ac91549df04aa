import { execFile } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

/**
 * Pronunciations for words the dictionary lacks (names from a session's context): eSpeak NG's
 * American English IPA (`espeak-ng -v en-us --ipa`), mapped to the CMU phone set of PocketSphinx's
 * en-us model (39 phones, no stress marks, as cmudict-en-us.dict writes them). eSpeak NG's
 * letter-to-sound rules are the best pronunciation source installed with the embedded engines;
 * the mapping is ours because no package maps eSpeak's IPA to CMU phones.
 */

/** IPA segments, longest first where one is a prefix of another. */
const IPA_TO_CMU: readonly (readonly [string, string])[] = [
  ["tʃ", "CH"],
  ["dʒ", "JH"],
  ["eɪ", "EY"],
  ["aɪ", "AY"],
  ["aʊ", "AW"],
  ["ɔɪ", "OY"],
  ["oʊ", "OW"],
  ["əʊ", "OW"],
  ["ɜː", "ER"],
  ["ɚ", "ER"],
  ["ɝ", "ER"],
  ["iː", "IY"],
  ["i", "IY"],
  ["ɪ", "IH"],
  ["ᵻ", "IH"],
  ["e", "EH"],
  ["ɛ", "EH"],
  ["æ", "AE"],
  ["a", "AA"],
  ["ɑː", "AA"],
  ["ɑ", "AA"],
  ["ɒ", "AA"],
  ["ɔː", "AO"],
  ["ɔ", "AO"],
  ["o", "OW"],
  ["ʊ", "UH"],
  ["uː", "UW"],
  ["u", "UW"],
  ["ʌ", "AH"],
  ["ə", "AH"],
  ["ɐ", "AH"],
  ["p", "P"],
  ["b", "B"],
  ["t", "T"],
  ["d", "D"],
  ["k", "K"],
  ["ɡ", "G"],
  ["g", "G"],
  ["f", "F"],
  ["v", "V"],
  ["θ", "TH"],
  ["ð", "DH"],
  ["s", "S"],
  ["z", "Z"],
  ["ʃ", "SH"],
  ["ʒ", "ZH"],
  ["h", "HH"],
  ["m", "M"],
  ["n", "N"],
  ["ŋ", "NG"],
  ["l", "L"],
  ["ɹ", "R"],
  ["r", "R"],
  ["w", "W"],
  ["ʍ", "W"],
  ["j", "Y"],
  // An American flap and a glottal stop are a /t/ in the dictionary ("butter" B AH T ER).
  ["ɾ", "T"],
  ["ʔ", "T"],
  ["x", "K"],
  ["ç", "HH"],
];

/** Stress, length, syllable and tie marks: the dictionary has none. */
const IGNORED = new Set(["ˈ", "ˌ", "ː", ".", "‿", "\u0361", " ", "-"]);
const SYLLABIC = "\u0329";

/** CMU phones for one word's IPA; undefined when a segment has no counterpart. */
export function cmuPhones(ipa: string): string | undefined {
  const phones: string[] = [];
  let rest = ipa.normalize("NFD");
  while (rest.length > 0) {
    const first = rest[0]!;
    if (IGNORED.has(first)) {
      rest = rest.slice(1);
      continue;
    }
    if (first === SYLLABIC) {
      // A syllabic consonant ("button" B AH T AH N): a schwa before it.
      phones.splice(-1, 0, "AH");
      rest = rest.slice(1);
      continue;
    }
    const match = IPA_TO_CMU.find(([segment]) => rest.startsWith(segment));
    if (!match) return undefined;
    phones.push(match[1]);
    rest = rest.slice(match[0].length);
  }
  return phones.length > 0 ? phones.join(" ") : undefined;
}

/**
 * CMU pronunciations of `words` (lower case, letters and apostrophes) by eSpeak NG, one call for all;
 * a word eSpeak spells with a segment the mapping lacks is left out.
 */
export async function pronounce(binary: string, words: readonly string[]): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  if (words.length === 0) return found;
  const { stdout } = await run(binary, ["-q", "-v", "en-us", "--ipa", words.join(", ")], {
    timeout: 10_000,
    maxBuffer: 1024 * 1024,
  });
  const lines = stdout
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean);
  if (lines.length !== words.length) return found;
  for (const [i, word] of words.entries()) {
    const phones = cmuPhones(lines[i]!);
    if (phones) found.set(word, phones);
  }
  return found;
}
