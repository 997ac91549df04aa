import { describe, expect, it } from "vitest";
import { inFlagTerms } from "../../src/cli/errors.js";

describe("inFlagTerms: the service's parameter names as the CLI's flags", () => {
  const live = { modelName: "--model", sourceLanguage: "--from", "audioOutputEnabled=false": "--no-audio" };
  it('rewrites name=value, name="value" and a bare name', () => {
    expect(
      inFlagTerms('voiceId=auto needs modelName=relay-2; sourceLanguage="de" and sourceLanguage', live),
    ).toBe("voiceId=auto needs --model relay-2; --from de and --from");
  });
  it("replaces a pair given whole, and leaves other values of that name as they are", () => {
    expect(inFlagTerms("audioOutputEnabled=false but audioOutputEnabled=true", live)).toBe(
      "--no-audio but audioOutputEnabled=true",
    );
  });
  it('reads dubbing\'s name "value" form, and leaves words that only contain a name', () => {
    const dub = { target_lang: "--to", source_lang: "--from" };
    expect(
      inFlagTerms('target_lang "xx" is not served; source_lang "auto" (the default); my_target_lang', dub),
    ).toBe("--to xx is not served; --from auto (the default); my_target_lang");
  });
  it("leaves a name that is already a flag (--context) as it is", () => {
    const flags = { context: "--context" };
    expect(inFlagTerms("context is 2001 characters long", flags)).toBe("--context is 2001 characters long");
    expect(inFlagTerms("pass --context or --context-file, not both", flags)).toBe(
      "pass --context or --context-file, not both",
    );
  });
});
