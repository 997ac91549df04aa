/**
 * Types for @echogarden/svoxpico-wasm (ships none): an Emscripten build of the SVOX Pico C API
 * (picoapi.h). Pointers are 32-bit offsets into `HEAPU8`; every export returns a pico_Status.
 */
declare module "@echogarden/svoxpico-wasm" {
  export interface SvoxPicoModule {
    readonly HEAPU8: Uint8Array;
    readonly FS: {
      writeFile(path: string, data: Uint8Array): void;
      unlink(path: string): void;
    };
    _malloc(size: number): number;
    _free(pointer: number): void;
    _pico_initialize(memory: number, size: number, outSystem: number): number;
    _pico_terminate(inOutSystem: number): number;
    _pico_getSystemStatusMessage(system: number, status: number, outMessage: number): number;
    _pico_loadResource(system: number, fileName: number, outResource: number): number;
    _pico_unloadResource(system: number, inOutResource: number): number;
    _pico_getResourceName(system: number, resource: number, outName: number): number;
    _pico_createVoiceDefinition(system: number, voiceName: number): number;
    _pico_addResourceToVoiceDefinition(system: number, voiceName: number, resourceName: number): number;
    _pico_releaseVoiceDefinition(system: number, voiceName: number): number;
    _pico_newEngine(system: number, voiceName: number, outEngine: number): number;
    _pico_disposeEngine(system: number, inOutEngine: number): number;
    _pico_putTextUtf8(engine: number, text: number, textSize: number, outBytesPut: number): number;
    _pico_getData(
      engine: number,
      buffer: number,
      bufferSize: number,
      outBytesReceived: number,
      outDataType: number,
    ): number;
    _pico_resetEngine(engine: number, resetMode: number): number;
    _pico_getEngineStatusMessage(engine: number, status: number, outMessage: number): number;
  }

  export interface SvoxPicoOptions {
    print?: (text: string) => void;
    printErr?: (text: string) => void;
  }

  const SvoxPico: (options?: SvoxPicoOptions) => Promise<SvoxPicoModule>;
  export default SvoxPico;
}
