import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  dataPackageOf,
  discoverModes,
  nullFlushCommands,
  parseModeFileName,
  shellWords,
  toIso639_1,
} from "../../src/engines/apertium/modes.js";

const ENG_SPA =
  "lt-proc '/d/apertium-eng-spa/eng-spa.automorf.bin' | apertium-tagger -g $2 '/d/apertium-eng-spa/eng-spa.prob'" +
  " | apertium-pretransfer | lt-proc -b '/d/apertium-eng-spa/eng-spa.autobil.bin'" +
  " | lt-proc $1 '/d/apertium-eng-spa/eng-spa.autogen.bin' | lt-proc -p '/d/apertium-eng-spa/eng-spa.autopgen.bin'\n";

describe("apertium mode names and codes", () => {
  it("accepts plain directions and ignores variants, alternatives and debug modes", () => {
    expect(parseModeFileName("eng-spa.mode")).toEqual({
      name: "eng-spa",
      sourceCode: "eng",
      targetCode: "spa",
    });
    expect(parseModeFileName("fr-es.mode")).toEqual({ name: "fr-es", sourceCode: "fr", targetCode: "es" });
    for (const name of [
      "es-pt_BR.mode",
      "spa-eng_US.mode",
      "eco-es-fr.mode",
      "eng-spa-tagger.mode",
      "README",
    ]) {
      expect(parseModeFileName(name)).toBeUndefined();
    }
  });

  it("maps Apertium codes to ISO 639-1", () => {
    expect(["eng", "spa", "fra", "fr", "por", "pt", "ita", "cat", "glg", "nob"].map(toIso639_1)).toEqual([
      "en",
      "es",
      "fr",
      "fr",
      "pt",
      "pt",
      "it",
      "ca",
      "gl",
      "nb",
    ]);
    expect(toIso639_1("ast")).toBeUndefined(); // Asturian has no 639-1 code
  });
});

describe("apertium null-flush commands", () => {
  it("adds -z to every program, picks unmarked generation and drops tagger options", () => {
    const commands = nullFlushCommands(ENG_SPA);
    expect(commands).toHaveLength(6);
    for (const argv of commands) expect(argv[1]).toBe("-z");
    expect(commands[1]).toEqual(["apertium-tagger", "-z", "-g", "/d/apertium-eng-spa/eng-spa.prob"]);
    expect(commands[4]).toEqual(["lt-proc", "-z", "-n", "/d/apertium-eng-spa/eng-spa.autogen.bin"]);
    expect(commands.flat().some((word) => word.includes("$"))).toBe(false);
  });

  it("leaves programs without null flush alone and does not split quoted pipes", () => {
    expect(nullFlushCommands("vislcg3 -g 'a|b.rlx' | cg-proc \"x y.bin\"")).toEqual([
      ["vislcg3", "-g", "a|b.rlx"],
      ["cg-proc", "-z", "x y.bin"],
    ]);
  });

  it("splits words like sh and refuses shell syntax it would need a shell for", () => {
    expect(shellWords(`a 'b c' "d\\"e" f\\ g ''`)).toEqual(["a", "b c", 'd"e', "f g", ""]);
    for (const bad of ["lt-proc x.bin > out", "a; b", "a $(b)", "a *.bin", "a 'open"]) {
      expect(() => nullFlushCommands(bad), bad).toThrow();
    }
  });

  it("names the data package", () => {
    expect(dataPackageOf(ENG_SPA)).toBe("apertium-eng-spa");
    expect(dataPackageOf("lt-proc x.bin")).toBeUndefined();
  });
});

describe("apertium mode discovery", () => {
  let dir = "";
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "apertium-modes-"));
    const files: Record<string, string> = {
      "eng-spa.mode": ENG_SPA,
      "en-es.mode": "lt-proc '/d/apertium-en-es/en-es.automorf.bin'",
      "spa-eng_US.mode": ENG_SPA,
      "eco-es-fr.mode": ENG_SPA,
      "ast-spa.mode": ENG_SPA,
      "pt-es.mode": "lt-proc '/d/apertium-es-pt/pt-es.automorf.bin'",
      "empty-mode.mode": "",
      "es-fr.mode": "",
      "spa-cat.mode": "lt-proc '/d/apertium-spa-cat/spa-cat.automorf.bin' 2>/dev/null",
    };
    for (const [name, text] of Object.entries(files)) await writeFile(path.join(dir, name), text);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("finds direct pairs once each, preferring the newer three-letter modes", async () => {
    const { modes, skipped } = await discoverModes(dir);
    expect(modes.map((m) => [m.name, m.from, m.to, m.dataPackage])).toEqual([
      ["eng-spa", "en", "es", "apertium-eng-spa"],
      ["pt-es", "pt", "es", "apertium-es-pt"],
    ]);
    expect(skipped).toEqual([{ name: "spa-cat", reason: expect.stringMatching(/unsupported shell syntax/) }]);
  });
});
