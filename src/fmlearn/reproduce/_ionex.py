"""A global ionosphere map (IONEX 1.0, Schaer, Gurtner & Feltens 1998) as a loose bound for
the real-data vTEC reproduction.

No maintained Python reader of IONEX exists (georinex reads observation and navigation files
only), and the reproduction needs nothing but the 2-D TEC maps: this reads the header keys
that place the grid and the "START OF TEC MAP" blocks, checking every count, and refuses the
rest with a message naming the file and line. It is not part of the data path of
:func:`fmlearn.datasets.load_rinex_network`.
"""

import gzip
import os

import numpy as np


class IonexMap:
    """TEC maps (TECU) on a latitude/longitude grid at hourly (or other) epochs.

    Attributes: ``times`` (seconds of the day of each map, from the first map's midnight),
    ``lat``, ``lon`` (degrees), ``tec`` of shape (n_maps, n_lat, n_lon), ``height_km``,
    ``first_epoch`` (numpy.datetime64).
    """

    def __init__(self, times, lat, lon, tec, height_km, first_epoch):
        self.times, self.lat, self.lon, self.tec = times, lat, lon, tec
        self.height_km, self.first_epoch = height_km, first_epoch

    def vtec(self, lat, lon, seconds_of_day):
        """vTEC at points (degrees, seconds of the day): bilinear in latitude and longitude,
        linear in time between maps (the time of day only: the map is of another day)."""
        lat, lon = np.asarray(lat, np.float64), np.mod(np.asarray(lon, np.float64) + 180,
                                                       360) - 180
        t = np.mod(np.asarray(seconds_of_day, np.float64), 86400.0)

        def axis(grid, x):
            g = grid if grid[1] > grid[0] else grid[::-1]
            i = np.clip(np.searchsorted(g, x) - 1, 0, g.shape[0] - 2)
            f = (x - g[i]) / (g[i + 1] - g[i])
            if grid[1] < grid[0]:
                i = grid.shape[0] - 2 - i
                f = 1 - f
            return i, np.clip(f, 0, 1)

        ti, tf = axis(self.times, t)
        yi, yf = axis(self.lat, lat)
        xi, xf = axis(self.lon, lon)
        out = 0.0
        for dt, wt in ((0, 1 - tf), (1, tf)):
            for dy, wy in ((0, 1 - yf), (1, yf)):
                for dx, wx in ((0, 1 - xf), (1, xf)):
                    out = out + wt * wy * wx * self.tec[ti + dt, yi + dy, xi + dx]
        return out


def _err(path, line, msg):
    return ValueError(f"{path}, line {line}: {msg}")


def read_ionex(path):
    """Read the TEC maps of an IONEX file (plain or gzip)."""
    path = os.fspath(path)
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="ascii") as fh:
            lines = fh.read().splitlines()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a readable IONEX file ({exc})") from None
    if not lines or "IONEX VERSION / TYPE" not in lines[0]:
        raise ValueError(f"{path}, line 1: not an IONEX file (no 'IONEX VERSION / TYPE')")
    head, i = {}, 0
    while i < len(lines) and lines[i][60:].strip() != "END OF HEADER":
        head.setdefault(lines[i][60:].strip(), lines[i][:60])
        i += 1
    try:
        lat1, lat2, dlat = (float(x) for x in head["LAT1 / LAT2 / DLAT"].split()[:3])
        lon1, lon2, dlon = (float(x) for x in head["LON1 / LON2 / DLON"].split()[:3])
        height = float(head["HGT1 / HGT2 / DHGT"].split()[0])
        exponent = int(head.get("EXPONENT", "-1").split()[0])
        first = [int(x) for x in head["EPOCH OF FIRST MAP"].split()[:6]]
    except (KeyError, ValueError, IndexError) as exc:
        raise ValueError(f"{path}: IONEX header lacks or garbles {exc}") from None
    lat = np.arange(lat1, lat2 + dlat / 2, dlat)
    lon = np.arange(lon1, lon2 + dlon / 2, dlon)
    first_epoch = np.datetime64(f"{first[0]:04d}-{first[1]:02d}-{first[2]:02d}", "s")
    maps, times = [], []
    n = len(lines)
    while i < n:
        if lines[i][60:].strip() != "START OF TEC MAP":
            if lines[i][60:].strip() == "START OF RMS MAP":
                break
            i += 1
            continue
        i += 1
        if i >= n:
            raise _err(path, i, "the file ends inside a TEC map (truncated)")
        try:
            ep = [int(x) for x in lines[i][:60].split()[:6]]
        except ValueError:
            raise _err(path, i + 1, "the EPOCH OF CURRENT MAP is not a date") from None
        try:
            # date plus seconds: some writers put the last map at 24:00:00
            when = np.datetime64(f"{ep[0]:04d}-{ep[1]:02d}-{ep[2]:02d}", "s") \
                + np.timedelta64(3600 * ep[3] + 60 * ep[4] + ep[5], "s")
        except (ValueError, IndexError):
            raise _err(path, i + 1, "the EPOCH OF CURRENT MAP is not a date") from None
        times.append((when - first_epoch) / np.timedelta64(1, "s"))
        grid = np.empty((lat.shape[0], lon.shape[0]))
        i += 1
        for r in range(lat.shape[0]):
            if i >= n:
                raise _err(path, i, "the file ends inside a TEC map (truncated)")
            if lines[i][60:].strip() != "LAT/LON1/LON2/DLON/H":
                raise _err(path, i + 1, "expected a LAT/LON1/LON2/DLON/H record")
            vals = []
            i += 1
            while len(vals) < lon.shape[0]:
                if i >= n:
                    raise _err(path, i, "the file ends inside a TEC map (truncated)")
                try:
                    vals += [int(lines[i][k:k + 5]) for k in range(0, len(lines[i].rstrip()), 5)]
                except ValueError:
                    raise _err(path, i + 1, "a TEC value is not an integer") from None
                i += 1
            if len(vals) != lon.shape[0]:
                raise _err(path, i, f"{len(vals)} values for {lon.shape[0]} longitudes")
            grid[r] = vals
        grid = np.where(grid == 9999, np.nan, grid * 10.0 ** exponent)
        maps.append(grid)
    if not maps:
        raise ValueError(f"{path}: no TEC map")
    return IonexMap(np.array(times), lat, lon, np.array(maps), height, first_epoch)
