"""HDR video frames (PQ or HLG transfer, BT.2020 primaries: what phones record by default) in the SDR sRGB colours a
player shows on an ordinary screen: the signal to light scaled so that diffuse white (203 cd/m², BT.2408) is SDR
white, the BT.2020 gamut to BT.709, the light above a knee (80 % of white) rolled off smoothly towards white without
reaching it (highlights keep their order and nothing clips; diffuse white itself lands at 90 %), then the sRGB curve.

Read as if it were SDR, an HDR frame comes out flat and grey (HLG) or dark (PQ), with washed-out colours."""

from __future__ import annotations

import numpy as np

PQ, HLG = 16, 18  # ITU-T H.273 transfer characteristics: SMPTE ST 2084, ARIB STD-B67
NAMES = {PQ: "PQ", HLG: "HLG"}
REFERENCE_WHITE = 203.0  # cd/m², diffuse white in HDR (ITU-R BT.2408), shown as SDR white
HLG_PEAK = 1000.0  # cd/m², the nominal HLG display the OOTF is taken for (system gamma 1.2)
KNEE = 0.8  # SDR linear light kept as it is below this; above, rolled off towards white

# linear BT.2020 RGB -> linear BT.709 RGB (ITU-R BT.2087)
_BT2020_TO_BT709 = np.array([[1.6605, -0.5876, -0.0728],
                             [-0.1246, 1.1329, -0.0083],
                             [-0.0182, -0.1006, 1.1187]], np.float32)
_BT2020_LUMA = np.array([0.2627, 0.6780, 0.0593], np.float32)
_BT709_LUMA = np.array([0.2126, 0.7152, 0.0722], np.float32)


def is_hdr(transfer: int | None) -> bool:
    return transfer in NAMES


def to_sdr(signal: np.ndarray, transfer: int) -> np.ndarray:
    """(H, W, 3) float RGB signal in 0..1 (BT.2020, ``transfer`` PQ or HLG) -> (H, W, 3) uint8 sRGB."""
    light = _pq_light(signal) if transfer == PQ else _hlg_light(signal)
    rgb = np.clip(light @ _BT2020_TO_BT709.T, 0, None)
    luma = rgb @ _BT709_LUMA
    excess = np.maximum(luma - KNEE, 0) / (1 - KNEE)  # Reinhard on the light above the knee: slope 1 there
    rolled = np.where(luma > KNEE, KNEE + (1 - KNEE) * excess / (1 + excess), luma)
    rgb *= (rolled / np.maximum(luma, 1e-6))[..., None]
    return np.round(_srgb(np.clip(rgb, 0, 1)) * 255).astype(np.uint8)


def _pq_light(signal: np.ndarray) -> np.ndarray:
    """SMPTE ST 2084 EOTF: signal -> display light, in units of reference white."""
    m1, m2, c1, c2, c3 = 0.1593017578125, 78.84375, 0.8359375, 18.8515625, 18.6875
    p = np.power(np.clip(signal, 0, 1), 1 / m2)
    return 10000 * np.power(np.maximum(p - c1, 0) / (c2 - c3 * p), 1 / m1) / REFERENCE_WHITE


def _hlg_light(signal: np.ndarray) -> np.ndarray:
    """ARIB STD-B67 inverse OETF and the BT.2100 OOTF for a 1000 cd/m² display (gamma 1.2): signal -> display
    light, in units of reference white."""
    a, b, c = 0.17883277, 0.28466892, 0.55991073
    e = np.clip(signal, 0, 1)
    scene = np.where(e <= 0.5, e * e / 3, (np.exp((e - c) / a) + b) / 12)
    luma = np.maximum(scene @ _BT2020_LUMA, 0)[..., None]
    return HLG_PEAK * np.power(luma, 0.2) * scene / REFERENCE_WHITE


def _srgb(linear: np.ndarray) -> np.ndarray:
    return np.where(linear <= 0.0031308, 12.92 * linear, 1.055 * np.power(linear, 1 / 2.4) - 0.055)
