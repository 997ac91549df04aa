import { Command } from "commander";

/**
 * The `relay models` commands. Their code (models.ts, models-check.ts) is imported when one runs,
 * so the rest of the CLI does not load the engines' pulls and checks (cli/main.ts).
 */

/**
 * Download from a mirror (or a test server) instead of the official locations: whisper models as
 * `<base>/ggml-<name>.bin`, sherpa-onnx archives as `<base>/<file>`, translation and tone colour
 * models in Hugging Face's layout (`<base>/<repo>/resolve/main/<file>`).
 */
const BASE_URL_ENV = "RELAY_MODELS_BASE_URL";

interface DirOptions {
  readonly dir?: string;
}

const dirHelp = "models directory (default: $MODELS_DIR, else $DATA_DIR/models)";

export function modelsCommand(): Command {
  const models = new Command("models").description(
    "whisper.cpp, sherpa-onnx (voices, streaming recognition, speakers), translation and tone colour models: list, download and verify",
  );
  models
    .command("list")
    .description("list the known models and which are pulled")
    .option("--dir <dir>", dirHelp)
    .action(async (options: DirOptions) => {
      const { dirOf, listModels } = await import("./models.js");
      process.exitCode = await listModels(dirOf(options));
    });
  models
    .command("pull")
    .description(`download a model (resumes an interrupted download; $${BASE_URL_ENV} sets a mirror)`)
    .argument("<name>", "model name (see `relay models list`), or `mt` and a direction")
    .argument("[direction]", "with `mt`: a translation direction such as de-en")
    .option("--dir <dir>", dirHelp)
    .action(async (name: string, direction: string | undefined, options: DirOptions) => {
      const { dirOf, pullModel } = await import("./models.js");
      process.exitCode = await pullModel(
        name,
        dirOf(options),
        process.env[BASE_URL_ENV] || undefined,
        direction,
      );
    });
  models
    .command("verify")
    .description(
      "check pulled models against the published checksum (whisper) or the SHA-256 recorded at pull (all pulled models without a name)",
    )
    .argument("[name]", "model name")
    .option("--dir <dir>", dirHelp)
    .action(async (name: string | undefined, options: DirOptions) => {
      const { dirOf, verifyModels } = await import("./models.js");
      process.exitCode = await verifyModels(name, dirOf(options));
    });
  models
    .command("import")
    .description(
      "install a voice published in another runtime's layout: `import piper <voice.onnx>` (its .onnx.json beside it)",
    )
    .argument("<format>", "the layout: piper")
    .argument("<file>", "the voice's .onnx file")
    .option("--dir <dir>", dirHelp)
    .option(
      "--espeak-data <dir>",
      "eSpeak NG data to phonemize with (default: a pulled Piper voice's, else eSpeak NG's)",
    )
    .action(async (format: string, file: string, options: DirOptions & { espeakData?: string }) => {
      const [{ dirOf }, { importModel }] = await Promise.all([
        import("./models.js"),
        import("./models-import.js"),
      ]);
      process.exitCode = await importModel(format, file, dirOf(options), options.espeakData);
    });
  models
    .command("check")
    .description(
      "self-test the installed neural voices, recognizer, translation and tone colour models on shipped sentences and recordings: WER, chrF, voice similarity and speed",
    )
    .option("--dir <dir>", dirHelp)
    .option("--verbose", "print each sentence and what the models made of it", false)
    .action(async (options: DirOptions & { verbose: boolean }) => {
      const [{ dirOf }, { checkModels }] = await Promise.all([
        import("./models.js"),
        import("./models-check.js"),
      ]);
      process.exitCode = await checkModels(dirOf(options), { verbose: options.verbose });
    });
  return models;
}
