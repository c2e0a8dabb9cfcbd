/**
 * The generated body of the contract's 100 MiB upload test, made the same way by the child process that
 * uploads it and by the test that checks its hash: 256 KiB chunks, chunk i filled with i and a marker at
 * byte 8.
 */
export function uploadBody(size: number): ReadableStream<Uint8Array> {
  let sent = 0
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent >= size) return controller.close()
      controller.enqueue(uploadChunk(sent / UPLOAD_CHUNK))
      sent += UPLOAD_CHUNK
    },
  })
}

export const UPLOAD_CHUNK = 256 * 1024

export function uploadChunk(i: number): Uint8Array {
  const chunk = new Uint8Array(UPLOAD_CHUNK)
  chunk.fill(i)
  new DataView(chunk.buffer).setFloat64(8, i * 1.5)
  return chunk
}
