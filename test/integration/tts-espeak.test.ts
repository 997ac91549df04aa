import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeWav } from "../../src/audio/wav.js";
import { createEspeakEngine } from "../../src/engines/espeak-ng/index.js";
import { ProgramLauncher } from "../../src/engines/espeak-ng/launcher.js";
import { defaultLocales, isoCodeOf, parseVoiceList } from "../../src/engines/espeak-ng/voices.js";
import type { TtsEngine } from "../../src/core/contracts.js";
import { defaultVoice, findVoice, VOICES } from "../../src/voices/library.js";
import { medianPitch, rms, seconds } from "../support/audio-measures.js";

// ---------------------------------------------------------------- audio measurements

const SENTENCES: Readonly<Record<string, string>> = {
  en: "The weather is lovely today, so we are going for a walk in the park.",
  es: "Hoy hace un tiempo estupendo, así que vamos a pasear por el parque.",
  zh: "今天天气很好，我们去公园散步吧。",
};

// ---------------------------------------------------------------- pure helpers

describe("eSpeak NG voice listing", () => {
  const listing = [
    "Pty Language       Age/Gender VoiceName          File                 Other Languages",
    " 5  af              --/M      Afrikaans          gmw/af               ",
    " 5  cmn             --/M      Chinese_(Mandarin,_latin_as_English) sit/cmn              (zh-cmn 5)(zh 5)",
    " 5  cmn-latn-pinyin --/M      Chinese_(Mandarin,_latin_as_Pinyin) sit/cmn-Latn-pinyin  (zh-cmn 5)(zh 5)",
    " 5  en-029          --/M      English_(Caribbean) gmw/en-029           (en 10)",
    " 2  en-gb           --/M      English_(Great_Britain) gmw/en               (en 2)",
    " 2  en-us           --/M      English_(America)  gmw/en-US            (en 3)",
    " 5  jbo             --/M      Lojban             art/jbo              ",
    " 5  nb              --/M      Norwegian_Bokmål  gmq/nb               (no 5)",
    " 5  pt              --/M      Portuguese_(Portugal) roa/pt               (pt-pt 5)",
    " 5  pt-br           --/M      Portuguese_(Brazil) roa/pt-BR            (pt 6)",
    " 5  py              --/M      Pyash              art/py               ",
    " 2  ru-lv           --/M      Russian_(Latvia)   zle/ru-LV            ",
    " 5  yue             --/M      Chinese_(Cantonese) sit/yue              (zh-yue 5)(zh 8)",
  ].join("\n");

  it("parses every voice line with its file and other languages", () => {
    const entries = parseVoiceList(listing);
    expect(entries).toHaveLength(13);
    expect(entries[2]).toEqual({
      language: "cmn-latn-pinyin",
      file: "sit/cmn-Latn-pinyin",
      name: "Chinese_(Mandarin,_latin_as_Pinyin)",
      priority: 5,
      otherLanguages: [
        { language: "zh-cmn", priority: 5 },
        { language: "zh", priority: 5 },
      ],
    });
  });

  it("maps languages to ISO 639-1 codes with documented defaults", () => {
    const defaults = defaultLocales(parseVoiceList(listing));
    expect([...defaults.keys()]).toEqual(["af", "en", "nb", "no", "pt", "ru", "zh"]);
    expect(defaults.get("en")?.file).toBe("gmw/en-US");
    expect(defaults.get("pt")?.file).toBe("roa/pt-BR");
    expect(defaults.get("zh")?.file).toBe("sit/cmn-Latn-pinyin");
    expect(defaults.get("no")?.file).toBe("gmq/nb");
    expect(defaults.get("ru")?.file).toBe("zle/ru-LV");
    expect(isoCodeOf("cmn")).toBe("zh");
    expect(isoCodeOf("py")).toBeUndefined();
    expect(isoCodeOf("yue")).toBeUndefined();
  });

  it("never serves Mandarin with the broken cmn or the Cantonese voice", () => {
    const withoutPinyin = listing
      .split("\n")
      .filter((line) => !line.includes("pinyin"))
      .join("\n");
    expect(defaultLocales(parseVoiceList(withoutPinyin)).has("zh")).toBe(false);
  });
});

describe("WAV decoding of eSpeak NG output", () => {
  it("reads the 16-bit mono file eSpeak NG writes with -w (sizes filled in)", () => {
    const header = Buffer.alloc(44);
    header.write("RIFF", 0, "ascii");
    header.writeUInt32LE(36 + 6, 4);
    header.write("WAVEfmt ", 8, "ascii");
    header.writeUInt32LE(16, 16);
    header.writeUInt16LE(1, 20);
    header.writeUInt16LE(1, 22);
    header.writeUInt32LE(22050, 24);
    header.writeUInt32LE(44100, 28);
    header.writeUInt16LE(2, 32);
    header.writeUInt16LE(16, 34);
    header.write("data", 36, "ascii");
    header.writeUInt32LE(6, 40);
    const body = Buffer.alloc(6);
    body.writeInt16LE(16384, 0);
    body.writeInt16LE(-32768, 2);
    body.writeInt16LE(0, 4);
    const { samples, sampleRate } = decodeWav(Buffer.concat([header, body]));
    expect(sampleRate).toBe(22050);
    expect(samples).toHaveLength(3);
    expect(samples[0]).toBeCloseTo(0.5, 4);
    expect(samples[1]).toBe(-1);
    expect(samples[2]).toBe(0);
    expect(() => decodeWav(Buffer.from("not a wav"))).toThrow();
  });

  it.skipIf(!existsSync("/usr/bin/espeak-ng"))(
    "gets files with correct RIFF and data sizes from the launcher",
    async () => {
      const dir = await mkdtemp(path.join(tmpdir(), "espeak-wav-"));
      const launcher = new ProgramLauncher("/usr/bin/espeak-ng", dir, 10_000);
      try {
        const bytes = await launcher.run(["-v", "en"], "Hello there.");
        expect(bytes.toString("ascii", 0, 4)).toBe("RIFF");
        expect(bytes.readUInt32LE(4)).toBe(bytes.length - 8);
        expect(bytes.toString("ascii", 36, 40)).toBe("data");
        expect(bytes.readUInt32LE(40)).toBe(bytes.length - 44);
        expect(decodeWav(bytes).samples.length).toBe((bytes.length - 44) / 2);
      } finally {
        launcher.close();
        await rm(dir, { recursive: true, force: true });
      }
    },
  );
});

describe("ProgramLauncher", () => {
  /** A stand-in program with eSpeak NG's file interface: copies -f <in> to -w <out>, or misbehaves on request. */
  let dir: string;
  let program: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "launcher-test-"));
    program = path.join(dir, "echo-program");
    await writeFile(
      program,
      [
        "#!/bin/sh",
        'while [ $# -gt 0 ]; do case "$1" in -f) in="$2"; shift;; -w) out="$2"; shift;; esac; shift; done',
        'case "$(cat "$in")" in hang) sleep 30;; fail) echo "bad input" >&2; exit 3;; esac',
        'cp "$in" "$out"',
      ].join("\n"),
      { mode: 0o755 },
    );
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("runs requests one after another and returns each output", async () => {
    const launcher = new ProgramLauncher(program, dir, 5000);
    const outputs = await Promise.all(["one", "two", "three"].map((text) => launcher.run(["-x", "1"], text)));
    expect(outputs.map((b) => b.toString())).toEqual(["one", "two", "three"]);
    launcher.close();
  });

  it("reports a failing run with its status and error output, then keeps working", async () => {
    const launcher = new ProgramLauncher(program, dir, 5000);
    await expect(launcher.run([], "fail")).rejects.toThrow(/exited with status 3: bad input/);
    expect((await launcher.run([], "fine")).toString()).toBe("fine");
    launcher.close();
  });

  it("kills a run that exceeds its time limit and recovers with a fresh shell", async () => {
    const launcher = new ProgramLauncher(program, dir, 300);
    await expect(launcher.run([], "hang")).rejects.toThrow(/timed out after 300 ms/);
    expect((await launcher.run([], "after")).toString()).toBe("after");
    launcher.close();
    await expect(launcher.run([], "closed")).rejects.toThrow(/closed/);
  });

  it("keeps concurrent runs of launchers sharing one directory apart", async () => {
    const launchers = [new ProgramLauncher(program, dir, 5000), new ProgramLauncher(program, dir, 5000)];
    const texts = Array.from({ length: 20 }, (_, i) => `text number ${i} `.repeat(i + 1));
    const outputs = await Promise.all(texts.map((text, i) => launchers[i % 2]!.run([], text)));
    expect(outputs.map((b) => b.toString())).toEqual(texts);
    for (const launcher of launchers) launcher.close();
  });

  it("refuses arguments that could split into several", () => {
    const launcher = new ProgramLauncher(program, dir, 5000);
    expect(() => launcher.run(["-v", "en us"], "x")).toThrow(/whitespace/);
    expect(() => launcher.run([""], "x")).toThrow(/empty/);
    launcher.close();
  });
});

// ---------------------------------------------------------------- the real engine

const ESPEAK = "/usr/bin/espeak-ng";

describe.skipIf(!existsSync(ESPEAK))("eSpeak NG engine (real espeak-ng)", () => {
  let engine: TtsEngine;

  beforeAll(async () => {
    engine = await createEspeakEngine({});
  });

  afterAll(async () => {
    await engine?.close();
  });

  it("reports its version and the languages eSpeak NG lists", () => {
    expect(engine.info.id).toBe("espeak-ng");
    expect(engine.info.version).toMatch(/^\d+\.\d+/);
    for (const code of ["en", "es", "fr", "de", "it", "pt", "ru", "ja", "ko", "zh"]) {
      expect(engine.capabilities.languages).toContain(code);
    }
    for (const code of engine.capabilities.languages) expect(code).toMatch(/^[a-z]{2}$/);
    expect(engine.capabilities.languages).not.toContain("py");
  });

  it("has every variant the voice library uses, with the gender the library assumes", () => {
    // The same source the engine uses to find its data directory.
    const dataDir = /Data at:\s*(.+)$/m.exec(execFileSync(ESPEAK, ["--version"], { encoding: "utf8" }))?.[1];
    const variantDir = path.join(dataDir!.trim(), "voices", "!v");
    const installed = new Set(readdirSync(variantDir));
    for (const voice of VOICES) {
      expect(installed.has(voice.timbre.variant), voice.timbre.variant).toBe(true);
      const file = readFileSync(path.join(variantDir, voice.timbre.variant), "utf8");
      const declared = /^\s*gender\s+(\w+)/im.exec(file)?.[1]?.toLowerCase();
      expect(declared, `${voice.name} (${voice.timbre.variant})`).toBe(voice.gender);
    }
  });

  it.each(Object.entries(SENTENCES))(
    "speaks %s as non-silent audio of plausible length",
    async (language, text) => {
      const audio = await engine.synthesize({ text, language, voice: defaultVoice("female") });
      expect(audio.sampleRate).toBe(22050);
      expect(seconds(audio)).toBeGreaterThan(0.5);
      expect(seconds(audio)).toBeLessThan(10);
      expect(rms(audio.samples)).toBeGreaterThan(0.02);
      expect(Math.max(...audio.samples.map(Math.abs))).toBeLessThanOrEqual(1);
    },
  );

  it("gives male and female voices clearly different pitch", async () => {
    const text = SENTENCES.en!;
    const female = await engine.synthesize({ text, language: "en", voice: defaultVoice("female") });
    const male = await engine.synthesize({ text, language: "en", voice: defaultVoice("male") });
    const femalePitch = medianPitch(female);
    const malePitch = medianPitch(male);
    expect(malePitch).toBeGreaterThan(60);
    expect(femalePitch).toBeGreaterThan(malePitch * 1.4);
  });

  it("renders a voice's pitch and rate settings", async () => {
    const text = SENTENCES.en!;
    // Same variant (f3), pitch 50 vs 62, rate 1.00 vs 1.08.
    const emma = await engine.synthesize({ text, language: "en", voice: findVoice(1)! });
    const yuki = await engine.synthesize({ text, language: "en", voice: findVoice(17)! });
    expect(findVoice(17)!.timbre.variant).toBe(findVoice(1)!.timbre.variant);
    expect(medianPitch(yuki)).toBeGreaterThan(medianPitch(emma) * 1.05);
    expect(seconds(yuki)).toBeLessThan(seconds(emma));
  });

  it("uses a voice's regional accent only for the language it names", async () => {
    const isla = VOICES.find((v) => v.timbre.accentLocales?.en === "en-gb-scotland")!;
    const plain = { ...isla, strongAccent: false, timbre: { ...isla.timbre, accentLocales: undefined } };
    const text = "I would like a glass of water and a bath, please.";
    const accented = await engine.synthesize({ text, language: "en", voice: isla });
    const neutral = await engine.synthesize({ text, language: "en", voice: plain });
    expect(Buffer.from(accented.samples.buffer).equals(Buffer.from(neutral.samples.buffer))).toBe(false);
    // No accent for German: identical to the same timbre without accent.
    const german = "Guten Morgen, wie geht es dir?";
    const a = await engine.synthesize({ text: german, language: "de", voice: isla });
    const b = await engine.synthesize({ text: german, language: "de", voice: plain });
    expect(Buffer.from(a.samples.buffer).equals(Buffer.from(b.samples.buffer))).toBe(true);
  });

  it("speaks shell and markup characters as text", async () => {
    const text = `He said "; rm -rf / <speak><prosody rate="x-slow">' $(reboot) \u0001 99S & done.`;
    const audio = await engine.synthesize({ text, language: "en", voice: defaultVoice("male") });
    expect(seconds(audio)).toBeGreaterThan(1);
    expect(seconds(audio)).toBeLessThan(15);
    expect(rms(audio.samples)).toBeGreaterThan(0.02);
    // Text starting like an option is still text.
    const dashed = await engine.synthesize({
      text: "--version -v xx",
      language: "en",
      voice: defaultVoice("male"),
    });
    expect(seconds(dashed)).toBeGreaterThan(0.5);
  });

  it("rejects an unknown language with a clear error", async () => {
    await expect(
      engine.synthesize({ text: "hello", language: "xx", voice: defaultVoice("male") }),
    ).rejects.toThrow(/cannot speak language "xx"/);
  });

  it("rejects a variant eSpeak NG does not have", async () => {
    const voice = {
      ...defaultVoice("male"),
      timbre: { ...defaultVoice("male").timbre, variant: "../../etc" },
    };
    await expect(engine.synthesize({ text: "hello", language: "en", voice })).rejects.toThrow(/variant/);
  });

  it("returns empty audio for empty text without running eSpeak NG", async () => {
    const audio = await engine.synthesize({ text: " \n ", language: "en", voice: defaultVoice("male") });
    expect(audio.samples.length).toBe(0);
  });

  it("speaks with every library voice", async () => {
    const results = await Promise.all(
      VOICES.map((voice) => engine.synthesize({ text: "Good morning.", language: "fr", voice })),
    );
    for (const audio of results) expect(rms(audio.samples)).toBeGreaterThan(0.02);
  });
});

describe("eSpeak NG engine errors", () => {
  it("fails clearly when the program cannot be started", async () => {
    await expect(createEspeakEngine({ binary: "/nonexistent/espeak-ng" })).rejects.toThrow(
      /could not run \/nonexistent\/espeak-ng/,
    );
  });

  it.skipIf(!existsSync(ESPEAK))("fails clearly when the data directory is wrong", async () => {
    await expect(createEspeakEngine({ dataDir: "/nonexistent" })).rejects.toThrow(
      "/nonexistent is not an espeak-ng-data directory",
    );
  });

  it.skipIf(!existsSync(ESPEAK))(
    "cancels an utterance when its signal aborts, queued or running, and keeps serving",
    async () => {
      const engine = await createEspeakEngine({ maxConcurrent: 1 });
      try {
        const voice = defaultVoice("male");
        const controller = new AbortController();
        const reason = new Error("session closed");
        const running = engine.synthesize(
          { text: "word ".repeat(5000), language: "en", voice },
          controller.signal,
        );
        const queued = engine.synthesize({ text: "Hello.", language: "en", voice }, controller.signal);
        const started = Date.now();
        setTimeout(() => controller.abort(reason), 100);
        await expect(running).rejects.toBe(reason);
        await expect(queued).rejects.toBe(reason);
        // Cut short: the long text alone takes several seconds to render.
        expect(Date.now() - started).toBeLessThan(2_000);
        const after = await engine.synthesize({ text: "Hello.", language: "en", voice });
        expect(after.samples.length).toBeGreaterThan(0);
        await expect(
          engine.synthesize({ text: "Hello.", language: "en", voice }, AbortSignal.abort(reason)),
        ).rejects.toBe(reason);
      } finally {
        await engine.close();
      }
    },
  );

  it.skipIf(!existsSync(ESPEAK))("kills an utterance that exceeds its time limit", async () => {
    const engine = await createEspeakEngine({ timeoutMs: 1 });
    try {
      const text = "word ".repeat(5000);
      await expect(engine.synthesize({ text, language: "en", voice: defaultVoice("male") })).rejects.toThrow(
        /timed out after 1 ms/,
      );
    } finally {
      await engine.close();
    }
  });
});
