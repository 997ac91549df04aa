/**
 * Writes a translation stand-in (test/support/stand-in-models/translation.ts) for transformers.js,
 * real-size by default, for benchmarks: the model directory to put under `env.localModelPath`.
 * With `--translate TEXT` it then loads it (q8, offline) and times one translation.
 *
 *   npx tsx scripts/write-translation-stand-in.ts --family marian --size real --dir /tmp/models/opus-mt-en-es --marker "[es]"
 *   npx tsx scripts/write-translation-stand-in.ts --family m2m100 --dir /tmp/models/m2m100_418M --translate "Hello there."
 */
import { readdirSync, statSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { env, pipeline, type TranslationPipeline } from "@huggingface/transformers";
import { writeTranslationStandIn } from "../test/support/stand-in-models/translation.js";

const { values } = parseArgs({
  options: {
    family: { type: "string" },
    size: { type: "string", default: "real" },
    dir: { type: "string" },
    marker: { type: "string" },
    translate: { type: "string" },
    "src-lang": { type: "string", default: "en" },
    "tgt-lang": { type: "string", default: "es" },
  },
});
const { family, size, dir } = values;
if ((family !== "marian" && family !== "m2m100") || (size !== "small" && size !== "real") || !dir) {
  console.error(
    "usage: write-translation-stand-in.ts --family marian|m2m100 [--size real|small] --dir DIR [--marker TEXT] [--translate TEXT]",
  );
  process.exit(2);
}

const started = performance.now();
writeTranslationStandIn({
  dir,
  family,
  size,
  ...(values.marker === undefined ? {} : { marker: values.marker }),
});
console.log(`wrote ${family} (${size}) in ${((performance.now() - started) / 1000).toFixed(1)} s to ${dir}`);
for (const file of [
  "onnx/encoder_model_quantized.onnx",
  "onnx/decoder_model_merged_quantized.onnx",
  "tokenizer.json",
])
  console.log(`  ${file}: ${(statSync(path.join(dir, file)).size / 1e6).toFixed(1)} MB`);

if (values.translate !== undefined) {
  const absolute = path.resolve(dir);
  Object.assign(env, { allowRemoteModels: false, localModelPath: path.dirname(absolute), useFSCache: false });
  let phase = performance.now();
  const translator = (await pipeline("translation", path.basename(absolute), {
    dtype: "q8",
  })) as TranslationPipeline;
  console.log(`loaded in ${((performance.now() - phase) / 1000).toFixed(2)} s`);
  const options = family === "m2m100" ? { src_lang: values["src-lang"], tgt_lang: values["tgt-lang"] } : {};
  const source = translator.tokenizer(values.translate).input_ids.dims[1];
  for (let run = 1; run <= 2; run++) {
    phase = performance.now();
    const [output] = (await translator(values.translate, options as Record<string, unknown>)) as {
      translation_text: string;
    }[];
    const target = translator.tokenizer(output!.translation_text).input_ids.dims[1];
    console.log(
      `translation ${run}: ${(performance.now() - phase).toFixed(0)} ms, ${source} source tokens → "${output!.translation_text}" (${target} tokens)`,
    );
  }
  await translator.dispose();
}
// Keeps the directory listing honest when --dir pointed at an old stand-in.
console.log(`files: ${readdirSync(dir).join(", ")}`);
