import { readdir } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { PLAYGROUND_FILES, SDK_FILES } from "../../src/api/playground.js";

/**
 * The pages' files are served from fixed lists (nothing else is read): a module added to the SDK or
 * the playground and left off its list breaks the pages in browsers, which import it.
 */
describe("the files the pages are served", () => {
  it("list every module of the SDK's sources", async () => {
    const modules = (await readdir(new URL("../../packages/client/src/", import.meta.url)))
      .filter((name) => name.endsWith(".ts") && !name.endsWith(".d.ts"))
      .map((name) => name.replace(/\.ts$/u, ".js"));
    expect([...SDK_FILES].sort()).toEqual(modules.sort());
  });

  it("list every file of the playground", async () => {
    const files = (await readdir(new URL("../../src/playground/", import.meta.url))).filter(
      (name) => !name.endsWith(".d.ts") && !name.endsWith(".html"),
    );
    expect(Object.keys(PLAYGROUND_FILES).sort()).toEqual(files.sort());
  });
});
