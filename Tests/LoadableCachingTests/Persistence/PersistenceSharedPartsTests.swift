import Foundation
import Testing

@testable import LoadableCaching

/// The parts the persistence, the store, the outbox and the synced collection share: one
/// restore-waiter, one wrapping of a cache's errors, one little-endian codec.
@Suite("Persistence: shared parts")
@MainActor
struct PersistenceSharedPartsTests {
    @Test("a restore-waiter ends every wait at finish(), once; later waits return at once")
    func restoreWaiter() async {
        let restore = RestoreWaiter()
        #expect(restore.isRestoring)
        var ended = 0
        let first = Task { @MainActor in
            await restore.restored()
            ended += 1
        }
        let second = Task { @MainActor in
            await restore.restored()
            ended += 1
        }
        await Task.yield()
        #expect(ended == 0)
        restore.finish()
        #expect(!restore.isRestoring)
        await first.value
        await second.value
        #expect(ended == 2)
        restore.finish()
        await restore.restored()
        #expect(!restore.isRestoring)
    }

    @Test("a cache's error is reported as it is; another is wrapped as the failure of the call")
    func cacheErrorWrapping() {
        let corrupt = LoadableCacheError.corrupt(key: "k", reason: "short")
        #expect("\(LoadableCacheError(corrupt, in: .save, key: "other"))" == "\(corrupt)")
        let underlying = CocoaError(.fileReadNoPermission)
        let cases: [(LoadableCacheError.Call, String)] = [
            (.load, "\(LoadableCacheError.loadFailed(key: "k", underlying: underlying))"),
            (.save, "\(LoadableCacheError.saveFailed(key: "k", underlying: underlying))"),
            (.remove, "\(LoadableCacheError.removeFailed(key: "k", underlying: underlying))"),
            (.removeAll, "\(LoadableCacheError.removeAllFailed(underlying: underlying))"),
        ]
        for (call, expected) in cases {
            #expect("\(LoadableCacheError(underlying, in: call, key: "k"))" == expected)
        }
    }

    @Test("the codec writes integers least significant byte first and reads them back")
    func codecRoundTrip() throws {
        var bytes: [UInt8] = []
        ByteCodec.append(UInt32(0x0102_0304), to: &bytes)
        ByteCodec.append(UInt64(0x1122_3344_5566_7788), to: &bytes)
        ByteCodec.append(UInt8(9), to: &bytes)
        ByteCodec.appendField(Array("hé".utf8), to: &bytes)
        #expect(Array(bytes[0..<4]) == [4, 3, 2, 1])
        #expect(Array(bytes[4..<12]) == [0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11])
        #expect(ByteCodec.integer(UInt64.self, in: bytes, at: 4) == 0x1122_3344_5566_7788)
        var reader = ByteReader(bytes[...])
        #expect(try reader.integer(UInt32.self) == 0x0102_0304)
        #expect(try reader.integer(UInt64.self) == 0x1122_3344_5566_7788)
        #expect(try reader.integer(UInt8.self) == 9)
        #expect(String(decoding: try reader.field(), as: UTF8.self) == "hé")
        #expect(reader.isAtEnd)
    }

    @Test("the reader reads a slice from its start, and says where it was cut short")
    func readerCutShort() throws {
        let bytes: [UInt8] = [0xFF, 2, 0, 0, 0, 7]
        var reader = ByteReader(bytes[1...])
        #expect(try reader.integer(UInt32.self) == 2)
        #expect(reader.remaining == 1)
        #expect(throws: ByteFormatError.self) { try reader.field() }
        do {
            _ = try reader.bytes(2)
            Issue.record("read past the end")
        } catch {
            #expect(error.reason == "cut short: 2 bytes wanted at offset 5, 1 left")
        }
    }
}
