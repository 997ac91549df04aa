import { describe, expect, it } from "vitest";
import { deformat, reformat } from "../../src/engines/apertium/format.js";

const NONCE = "relay:7";

describe("apertium deformat", () => {
  it("escapes reserved characters and ends with the inserted period and nonce superblank", () => {
    expect(deformat("a ^b$ c/d <e> @f {h} [i] \\j", NONCE)).toBe(
      "a \\^b\\$ c\\/d \\<e\\> \\@f \\{h\\} \\[i\\] \\\\j.[relay:7]",
    );
  });

  it("carries *, # and ~ in superblanks so they cannot be mistaken for marks", () => {
    expect(deformat("5*3 #tag m~n ***", NONCE)).toBe("5[*]3 [#]tag m[~]n [***].[relay:7]");
  });

  it("turns line breaks (with surrounding blanks) into one superblank and NUL into a space", () => {
    expect(deformat("one  \n\n two\r\nthree\u0000four", NONCE)).toBe(
      "one[  \n\n ]two[\r\n]three four.[relay:7]",
    );
  });
});

describe("apertium reformat", () => {
  it("unescapes, unwraps superblanks and drops the inserted period and the nonce", () => {
    expect(reformat("Un \\^b\\$ c\\/d 5[*]3[\n]dos.[relay:7]", NONCE)).toBe("Un ^b$ c/d 5*3\ndos");
  });

  it("strips unknown-word, bilingual and generation marks", () => {
    expect(reformat("*Piquet @Jr es #o ~x.[relay:7]", NONCE)).toBe("Piquet Jr es o x");
  });

  it("keeps a real final period and collapses blanks left by dropped words", () => {
    expect(reformat("  Tengo  gatos..[relay:7]", NONCE)).toBe("Tengo gatos.");
    expect(reformat("Hola, cómo eres?.[relay:7]", NONCE)).toBe("Hola, cómo eres?");
  });

  it("finds the nonce even when transfer moved it before the period", () => {
    expect(reformat("Hola[relay:7].", NONCE)).toBe("Hola");
  });

  it("reports an answer without the expected nonce as lost sync", () => {
    expect(reformat("Hola.[relay:6]", NONCE)).toBeUndefined();
    expect(reformat("Hola.\\[relay:7]", NONCE)).toBeUndefined();
    expect(reformat("Hola.", NONCE)).toBeUndefined();
  });

  it("round-trips any text through an identity pipeline", () => {
    const samples = [
      "a ^b$ c/d <e> @f *g {h} [i] \\j\nsecond line",
      "[relay:7] \\[ ]] [[ \\\\ ~~ ## @@ ** ^$",
      "Ünïcödé — “quotes” 🙂 and\ttabs",
      "line one\n\nline two  \n  line three",
      "ends with a backslash \\",
      "\\",
    ];
    for (const text of samples) {
      expect(reformat(deformat(text, NONCE), NONCE)).toBe(text.replace(/\t/g, " "));
    }
  });
});
