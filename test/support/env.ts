export const API_KEY = "test-key";
export const BROKE_KEY = "broke-key";
export const DUBBING_ONLY_KEY = "dubbing-key";

/**
 * The environment every test service starts from (`startServer()` and `injectApp()`): silent logs,
 * the three test keys (`API_KEY` with the default balance, `BROKE_KEY` with none, `DUBBING_ONLY_KEY`
 * entitled to dubbing only), no in-process dubbing workers, short job leases, the run's voice
 * measurements.
 */
export function testEnv(baseUrl: string, dataDir: string): Record<string, string> {
  const { hostname, port } = new URL(baseUrl);
  return {
    PORT: port,
    HOST: hostname,
    PUBLIC_BASE_URL: baseUrl,
    LOG_LEVEL: "silent",
    API_KEYS: `${API_KEY},${BROKE_KEY}:0,${DUBBING_ONLY_KEY}:10:dubbing`,
    DATA_DIR: dataDir,
    DUBBING_WORKERS: "0",
    DUBBING_LEASE_SEC: "3",
    // One directory for the whole run (test/support/global-setup.ts): each voice measured once.
    ...(process.env.VOICE_MEASUREMENTS_DIR
      ? { VOICE_MEASUREMENTS_DIR: process.env.VOICE_MEASUREMENTS_DIR }
      : {}),
  };
}
