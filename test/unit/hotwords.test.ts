import { describe, expect, it } from "vitest";
import { glossaryFromContext } from "../../src/core/glossary.js";
import { hotwordsFrom, MAX_HOTWORDS } from "../../src/engines/sherpa-onnx/hotwords.js";

const hotwordsFromContext = (context: string | undefined) => hotwordsFrom(glossaryFromContext(context));

describe("hotwords from a session's context", () => {
  it("takes the context's terms (short items, the names of longer prose), in the model's upper case", () => {
    expect(hotwordsFromContext("Meeting with Anneliese Brandt about the rollout, Kubernetes, OKRs")).toEqual([
      "ANNELIESE BRANDT",
      "KUBERNETES",
      "OKRS",
    ]);
  });

  it("keeps letters and apostrophes only, accents dropped, each phrase once", () => {
    expect(hotwordsFromContext("O'Brien, o'brien, São Paulo, Zürich")).toEqual([
      "O'BRIEN",
      "SAO PAULO",
      "ZURICH",
    ]);
    // The model writes numbers as words: a phrase with digits could never match.
    expect(hotwordsFromContext("K8s, Kubernetes")).toEqual(["KUBERNETES"]);
    expect(hotwordsFromContext(undefined)).toEqual([]);
    expect(hotwordsFromContext("  ,, ; ")).toEqual([]);
  });

  it(`passes at most ${MAX_HOTWORDS} phrases`, () => {
    const letters = (i: number) =>
      String.fromCharCode(65 + (i % 26)) + String.fromCharCode(65 + Math.floor(i / 26));
    const many = Array.from({ length: 100 }, (_, i) => `Term${letters(i)}`).join(", ");
    expect(hotwordsFromContext(many)).toHaveLength(MAX_HOTWORDS);
  });
});
