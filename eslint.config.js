import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "packages/*/dist/", "node_modules/", "coverage/", "native/whisper-cpp/build/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
    },
  },
  {
    // The playground runs in browsers, as plain JavaScript (no build step).
    files: ["src/playground/**/*.js"],
    languageOptions: {
      globals: Object.fromEntries(
        [
          "document",
          "location",
          "fetch",
          "navigator",
          "setTimeout",
          "clearTimeout",
          "Option",
          "CSS",
          "AudioContext",
          "AudioWorkletNode",
          "AudioWorkletProcessor",
          "registerProcessor",
        ].map((name) => [name, "readonly"]),
      ),
    },
  },
);
