/**
 * Known-good whisper.cpp ggml models, as upstream publishes them.
 *
 * Source: ggml-org/whisper.cpp at commit 233fe1fc9b48a09e361d3594520838ca266537fe (2026-08-22):
 * - `models/download-ggml-model.sh` lists the published model names (and where they are hosted);
 * - `models/README.md` ("Available models") states the disk size and SHA-1 of some of them.
 * Upstream publishes no checksum and no size for the q5_1 and q8_0 variants nor for
 * large-v3-turbo-q8_0: those entries have neither, and `verify` reports "no published checksum".
 * Nothing here is computed or copied from elsewhere.
 */
import type { DownloadTarget } from "../kit/models/download.js";

/** Where download-ggml-model.sh fetches every model in this catalogue from. */
export const OFFICIAL_BASE_URL = "https://huggingface.co/ggerganov/whisper.cpp/resolve/main";

export type ModelLanguages = "multilingual" | "en";

/**
 * A whisper.cpp model: `name` is the one download-ggml-model.sh takes (`base.en-q5_1`), `file`
 * `ggml-<name>.bin` (what whisper.cpp and the service expect on disk); `sha1` is absent when
 * upstream publishes none, `bytes` known only for test fixtures (upstream states rounded sizes).
 */
export interface ModelEntry extends Omit<DownloadTarget, "sha256"> {
  /** `en`: English-only (`.en` models); otherwise multilingual. */
  readonly languages: ModelLanguages;
  /** Weight quantisation, absent for the full-precision (f16) files. */
  readonly quantisation?: "q5_0" | "q5_1" | "q8_0";
  /** One line for `relay models list`. */
  readonly description: string;
}

type Spec = Omit<ModelEntry, "file" | "url" | "languages" | "quantisation">;

function entry(spec: Spec): ModelEntry {
  const quantisation = /-(q5_0|q5_1|q8_0)$/u.exec(spec.name)?.[1] as ModelEntry["quantisation"];
  return {
    ...spec,
    file: `ggml-${spec.name}.bin`,
    url: `${OFFICIAL_BASE_URL}/ggml-${spec.name}.bin`,
    languages: /\.en(-|$)/u.test(spec.name) ? "en" : "multilingual",
    ...(quantisation ? { quantisation } : {}),
  };
}

export const CATALOGUE: readonly ModelEntry[] = [
  entry({
    name: "tiny",
    sizeMiB: 75,
    sha1: "bd577a113a864445d4c299885e0cb97d4ba92b5f",
    description: "Tiny (39 M parameters): fastest, least accurate",
  }),
  entry({
    name: "tiny.en",
    sizeMiB: 75,
    sha1: "c78c86eb1a8faa21b369bcd33207cc90d64ae9df",
    description: "Tiny, English only: more accurate than tiny on English",
  }),
  entry({ name: "tiny-q5_1", description: "Tiny, 5-bit quantised: smallest download" }),
  entry({ name: "tiny.en-q5_1", description: "Tiny English only, 5-bit quantised" }),
  entry({ name: "tiny-q8_0", description: "Tiny, 8-bit quantised" }),
  entry({
    name: "base",
    sizeMiB: 142,
    sha1: "465707469ff3a37a2b9b8d8f89f2f99de7299dac",
    description: "Base (74 M parameters): a good default on a CPU",
  }),
  entry({
    name: "base.en",
    sizeMiB: 142,
    sha1: "137c40403d78fd54d454da0f9bd998f78703390c",
    description: "Base, English only: more accurate than base on English",
  }),
  entry({ name: "base-q5_1", description: "Base, 5-bit quantised" }),
  entry({ name: "base.en-q5_1", description: "Base English only, 5-bit quantised" }),
  entry({ name: "base-q8_0", description: "Base, 8-bit quantised" }),
  entry({
    name: "small",
    sizeMiB: 466,
    sha1: "55356645c2b361a969dfd0ef2c5a50d530afd8d5",
    description: "Small (244 M parameters): accurate, several times slower than base",
  }),
  entry({
    name: "small.en",
    sizeMiB: 466,
    sha1: "db8a495a91d927739e50b3fc1cc4c6b8f6c2d022",
    description: "Small, English only",
  }),
  entry({ name: "small-q5_1", description: "Small, 5-bit quantised" }),
  entry({ name: "small.en-q5_1", description: "Small English only, 5-bit quantised" }),
  entry({ name: "small-q8_0", description: "Small, 8-bit quantised" }),
  entry({
    name: "large-v3-turbo",
    // Upstream states "1.5 GiB".
    sizeMiB: 1536,
    sha1: "4af2b29d7ec73d781377bfd1758ca957a807e941",
    description:
      "Large v3 turbo (809 M parameters, pruned decoder): most accurate here, needs a fast machine",
  }),
  entry({
    name: "large-v3-turbo-q5_0",
    sizeMiB: 547,
    sha1: "e050f7970618a659205450ad97eb95a18d69c9ee",
    description: "Large v3 turbo, 5-bit quantised: near-large accuracy at a third of the size",
  }),
  entry({ name: "large-v3-turbo-q8_0", description: "Large v3 turbo, 8-bit quantised" }),
];

export function findModel(name: string): ModelEntry | undefined {
  return CATALOGUE.find((model) => model.name === name);
}

/** "75 MiB", "1.5 GiB", or undefined when upstream states no size. */
export function formatPublishedSize(entry: ModelEntry): string | undefined {
  if (entry.sizeMiB === undefined) return undefined;
  return entry.sizeMiB >= 1024 ? `${+(entry.sizeMiB / 1024).toFixed(1)} GiB` : `${entry.sizeMiB} MiB`;
}
